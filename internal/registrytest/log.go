package registrytest

import (
	"sync"
	"sync/atomic"

	"github.com/sirupsen/logrus"
)

// The registry logs through the standard logrus logger, very verbosely (a line
// per request), and offers no per-instance logger from outside its module.
// Every line it writes carries the "go.version" field of its default logger, so
// a formatter wrapped around the standard logger's drops exactly those lines
// while no running registry asked for Debug. Other logrus users (containers/image)
// are unaffected.

const registryLogField = "go.version"

var (
	installLogFilter sync.Once
	debugRegistries  atomic.Int64
)

// registryLogFilter drops the registry's log entries unless a Debug registry runs.
type registryLogFilter struct {
	next logrus.Formatter
}

// Format implements logrus.Formatter.
func (f registryLogFilter) Format(e *logrus.Entry) ([]byte, error) {
	if _, fromRegistry := e.Data[registryLogField]; fromRegistry && debugRegistries.Load() == 0 {
		return nil, nil
	}
	return f.next.Format(e)
}

// setRegistryLogsVisible installs the filter once and counts a Debug registry.
func setRegistryLogsVisible(debug bool) {
	installLogFilter.Do(func() {
		std := logrus.StandardLogger()
		next := std.Formatter
		if next == nil {
			next = &logrus.TextFormatter{}
		}
		std.SetFormatter(registryLogFilter{next: next})
	})
	if debug {
		debugRegistries.Add(1)
	}
}

// releaseRegistryLogs undoes the count of setRegistryLogsVisible.
func releaseRegistryLogs(debug bool) {
	if debug {
		debugRegistries.Add(-1)
	}
}
