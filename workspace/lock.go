package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// lockName is the lock file in a workspace and in a store. It holds who
// has the lock, for the message that refuses a second run.
const lockName = ".gapmirror.lock"

// holder is what a lock file says of the run holding the lock.
type holder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host,omitempty"`
	Started time.Time `json:"started"`
}

func (h holder) String() string {
	if h.PID == 0 {
		return "another gapmirror run (which one is not recorded yet)"
	}
	host := ""
	if h.Host != "" {
		host = " on " + h.Host
	}
	return fmt.Sprintf("gapmirror pid %d%s, started %s", h.PID, host, h.Started.Format(time.RFC3339))
}

// Lock is an advisory lock (flock) on a lock file, released when the
// process ends however it ends, so a killed run never leaves it behind.
type Lock struct{ f *os.File }

// Release gives the lock up.
func (l *Lock) Release() {
	if l != nil && l.f != nil {
		unlockFile(l.f)
		l.f.Close()
		l.f = nil
	}
}

// tryLock takes the lock of dir at once, or says who holds it.
func tryLock(dir string) (*Lock, *holder, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	p := filepath.Join(dir, lockName)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("opening lock file: %w", err)
	}
	ok, err := lockFile(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("locking %s: %w", p, err)
	}
	if !ok {
		var h holder
		if data, err := os.ReadFile(p); err == nil {
			_ = json.Unmarshal(data, &h) // empty while the holder is still writing it
		}
		f.Close()
		return nil, &h, nil
	}
	host, _ := os.Hostname()
	data, _ := json.Marshal(holder{PID: os.Getpid(), Host: host, Started: time.Now().UTC().Truncate(time.Second)})
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(data, 0) // who holds it is a courtesy; the flock is the lock
	}
	return &Lock{f: f}, nil, nil
}

// LockWorkspace takes the workspace's lock for the run, refusing at once
// when another run has it: two runs writing the same records would each
// trust what the other half-wrote.
func LockWorkspace(ws string) (*Lock, error) {
	l, h, err := tryLock(ws)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", ws, err)
	}
	if h != nil {
		return nil, &lockedError{What: "workspace", Dir: ws, Holder: *h}
	}
	return l, nil
}

// LockStore takes the store's lock for the run, waiting while another run
// (of another workspace) has it: runs sharing a store take turns, since
// each keeps the store's index in memory and cleans its ingest folder.
func LockStore(ctx context.Context, dir string, log *slog.Logger) (*Lock, error) {
	waited := false
	for {
		l, h, err := tryLock(dir)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", dir, err)
		}
		if h == nil {
			return l, nil
		}
		if !waited && log != nil {
			log.Info("waiting for the local store: another run is using it", "store", dir, "holder", h.String())
			waited = true
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(&lockedError{What: "store", Dir: dir, Holder: *h}, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// lockedError refuses a run because another holds the lock it needs.
type lockedError struct {
	What   string // "workspace" or "store"
	Dir    string
	Holder holder
}

func (e *lockedError) Error() string {
	return fmt.Sprintf("%s %s is in use by %s: wait for that run to end (or stop it) and run again; two runs on one %s would overwrite each other's records",
		e.What, e.Dir, e.Holder, e.What)
}
