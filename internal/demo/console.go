package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/term"
)

// console prints the demo's story: steps, commands, tool output and checks.
// Colours are used only on a terminal, and never with NO_COLOR set.
type console struct {
	mu    sync.Mutex
	w     io.Writer
	color bool
}

func newConsole(f *os.File) *console {
	return &console{w: f, color: term.IsTerminal(int(f.Fd())) && os.Getenv("NO_COLOR") == ""}
}

// ANSI styles.
const (
	bold  = "\x1b[1m"
	dim   = "\x1b[2m"
	green = "\x1b[32m"
	red   = "\x1b[31m"
	cyan  = "\x1b[36m"
	reset = "\x1b[0m"
)

// style wraps s in an ANSI style on a colour terminal.
func (c *console) style(code, s string) string {
	if !c.color {
		return s
	}
	return code + s + reset
}

// printf writes one formatted piece of output.
func (c *console) printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.w, format, args...)
}

// step starts a new part of the story.
func (c *console) step(format string, args ...any) {
	c.printf("\n%s\n", c.style(bold, "▸ "+fmt.Sprintf(format, args...)))
}

// info prints an indented line.
func (c *console) info(format string, args ...any) {
	c.printf("  %s\n", fmt.Sprintf(format, args...))
}

// good prints a passed check.
func (c *console) good(format string, args ...any) {
	c.printf("  %s %s\n", c.style(green, "✓"), fmt.Sprintf(format, args...))
}

// bad prints a failed check.
func (c *console) bad(format string, args ...any) {
	c.printf("  %s %s\n", c.style(red, "✗"), fmt.Sprintf(format, args...))
}

// command echoes a command line as a user would type it; each group of
// arguments after the first goes on a continuation line.
func (c *console) command(groups ...[]string) {
	var b strings.Builder
	for i, g := range groups {
		if i == 0 {
			b.WriteString("  $ ")
		} else {
			b.WriteString(" \\\n        ")
		}
		quoted := make([]string, len(g))
		for j, a := range g {
			quoted[j] = shellQuote(a)
		}
		b.WriteString(strings.Join(quoted, " "))
	}
	c.printf("%s\n", c.style(cyan, b.String()))
}

// block prints text as an indented block behind a margin.
func (c *console) block(margin, text string) {
	text = strings.TrimRight(text, "\n")
	for line := range strings.SplitSeq(text, "\n") {
		c.printf("%s%s\n", c.style(dim, margin), line)
	}
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// toolOutput is an io.Writer that prints a subprocess's output line by line
// behind a margin and keeps a copy. Separate instances for stdout and stderr
// share the console, so their lines never mix mid-line.
type toolOutput struct {
	c       *console
	margin  string
	partial []byte
	kept    *lockedBuffer
}

func (t *toolOutput) Write(p []byte) (int, error) {
	t.kept.Write(p)
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		t.c.block(t.margin, string(t.partial[:i]))
		t.partial = t.partial[i+1:]
	}
	return len(p), nil
}

// flush prints a last line that had no newline.
func (t *toolOutput) flush() {
	if len(t.partial) > 0 {
		t.c.block(t.margin, string(t.partial))
		t.partial = nil
	}
}

// lockedBuffer is a bytes.Buffer safe for two writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// humanBytes formats n as B, KiB, MiB or GiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n)/unit, "KiB"
	for _, s := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}
