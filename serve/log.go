package serve

import (
	"sync"
	"sync/atomic"

	"github.com/sirupsen/logrus"
)

// The registry logs through the standard logrus logger: a line per request,
// and an error line for every 404 (a push asking whether a blob is there
// is one); garbage collection a line per blob, link and manifest it deletes.
// Its entries carry the "go.version" field; outside debug (Options.Debug,
// GCOptions.Debug) only those that say the registry itself failed (a 5xx
// answer, or an error not about a request) get through.
const registryLogField = "go.version"

var (
	installLogFilter sync.Once
	registryVerbose  atomic.Bool
)

type registryLogFilter struct {
	next logrus.Formatter
}

func (f registryLogFilter) Format(e *logrus.Entry) ([]byte, error) {
	if _, fromRegistry := e.Data[registryLogField]; fromRegistry && !registryVerbose.Load() && !serious(e) {
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

// registryLogs lets every registry entry through (verbose), or only the
// serious ones; it installs the filter once, for the process.
func registryLogs(verbose bool) {
	registryVerbose.Store(verbose)
	installLogFilter.Do(func() {
		std := logrus.StandardLogger()
		next := std.Formatter
		if next == nil {
			next = &logrus.TextFormatter{}
		}
		std.SetFormatter(registryLogFilter{next: next})
	})
}
