package serve

import (
	"sync"

	"github.com/sirupsen/logrus"
)

// The registry logs through the standard logrus logger: a line per request,
// and an error line for every 404 (a push asking whether a blob is there
// is one). Its entries carry the "go.version" field; outside Options.Debug
// only those that say the registry itself failed (a 5xx answer, or an
// error not about a request) get through.
const registryLogField = "go.version"

var installLogFilter sync.Once

type registryLogFilter struct {
	next logrus.Formatter
}

func (f registryLogFilter) Format(e *logrus.Entry) ([]byte, error) {
	if _, fromRegistry := e.Data[registryLogField]; fromRegistry && !serious(e) {
		return nil, nil
	}
	return f.next.Format(e)
}

// serious: an error level entry that is not a request answered 4xx.
func serious(e *logrus.Entry) bool {
	if e.Level > logrus.ErrorLevel {
		return false
	}
	switch s := e.Data["http.response.status"].(type) {
	case int:
		return s >= 500
	}
	return true
}

// quietRegistryLogs installs the filter (once, for the process).
func quietRegistryLogs() {
	installLogFilter.Do(func() {
		std := logrus.StandardLogger()
		next := std.Formatter
		if next == nil {
			next = &logrus.TextFormatter{}
		}
		std.SetFormatter(registryLogFilter{next: next})
	})
}
