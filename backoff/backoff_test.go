package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDo(t *testing.T) {
	flaky := errors.New("flaky")
	for _, tc := range []struct {
		name      string
		retries   int
		fails     int  // failures before success
		transient bool // of those failures
		wantCalls int
		wantErr   bool
		wantWaits []time.Duration
	}{
		{"succeeds at once", 3, 0, true, 1, false, nil},
		{"transient then success", 3, 2, true, 3, false, []time.Duration{time.Millisecond, 2 * time.Millisecond}},
		{"retries spent", 2, 5, true, 3, true, []time.Duration{time.Millisecond, 2 * time.Millisecond}},
		{"capped wait", 4, 4, true, 5, false, []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 3 * time.Millisecond}},
		{"permanent is not retried", 3, 1, false, 1, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			var waits []time.Duration
			p := Policy{Retries: tc.retries, Delay: time.Millisecond, Max: 3 * time.Millisecond,
				OnRetry: func(attempt int, err error, wait time.Duration) {
					if attempt != len(waits)+1 || !errors.Is(err, flaky) {
						t.Errorf("OnRetry(%d, %v)", attempt, err)
					}
					waits = append(waits, wait)
				}}
			err := p.Do(context.Background(), func() (bool, error) {
				calls++
				if calls <= tc.fails {
					return tc.transient, flaky
				}
				return false, nil
			})
			if calls != tc.wantCalls || (err != nil) != tc.wantErr || len(waits) != len(tc.wantWaits) {
				t.Fatalf("calls %d, err %v, waits %v", calls, err, waits)
			}
			for i := range waits {
				if waits[i] != tc.wantWaits[i] {
					t.Errorf("wait %d: %v, want %v", i, waits[i], tc.wantWaits[i])
				}
			}
		})
	}
}

func TestDoCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	flaky := errors.New("flaky")
	err := Policy{Retries: 5, Delay: time.Hour}.Do(ctx, func() (bool, error) { return true, flaky })
	if !errors.Is(err, flaky) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
}
