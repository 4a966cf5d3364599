package sections

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// fieldPath finds the configuration field an error message names first.
var fieldPath = regexp.MustCompile(`mirror\.platform\.(?:channels|architectures)\[\d+\](?:\.\w+)?`)

// LocateFilterError prefixes each of err's errors that names a mirror.platform field
// with the file and line of that field, as configuration errors are.
func (t *Env) locate(err error) error {
	if err == nil || t.Config == nil || t.ConfigPath == "" {
		return err
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]error, 0, len(errs))
	for _, e := range errs {
		path := fieldPath.FindString(e.Error())
		line := 0
		if path != "" {
			line = t.Config.Line(path)
		}
		switch {
		case line > 0:
			out = append(out, fmt.Errorf("%s:%d: %w", t.ConfigPath, line, e))
		case !strings.HasPrefix(e.Error(), "mirror.platform"):
			out = append(out, fmt.Errorf("mirror.platform.channels: %w", e))
		default:
			out = append(out, e)
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return errors.Join(out...)
}
