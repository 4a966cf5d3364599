package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsCommandLines: every gapmirror command line in a fenced code block
// of the README and docs/*.md names a command gapmirror has and flags that
// command takes (parsed, not run), so that the documentation cannot drift
// from the CLI unnoticed.
func TestDocsCommandLines(t *testing.T) {
	// The check itself: a wrong flag and a wrong command are caught.
	for _, bad := range []string{"gapmirror mirror --no-such-flag -c isc.yaml file:///x", "gapmirror list operatros"} {
		ls := docCommandLines("```sh\n" + bad + " # comment\n```\n")
		if len(ls) != 1 {
			t.Fatalf("%q: extracted %v", bad, ls)
		}
		if err := parseDocLine(ls[0].args); err == nil {
			t.Errorf("%q: not refused", bad)
		}
	}
	files, _ := filepath.Glob("../../docs/*.md")
	files = append([]string{"../../README.md"}, files...)
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range docCommandLines(string(data)) {
			checked++
			if err := parseDocLine(l.args); err != nil {
				t.Errorf("%s:%d: gapmirror %s: %v", strings.TrimPrefix(f, "../../"), l.line, strings.Join(l.args, " "), err)
			}
		}
	}
	t.Logf("%d command lines checked", checked)
	if checked < 40 {
		t.Errorf("only %d gapmirror command lines found in the docs' code blocks: the extraction is broken", checked)
	}
}

// parseDocLine parses a documented command line as gapmirror would,
// without running it: an unknown command or flag, a flag without its
// value or with an invalid one is an error; argument counts are not
// checked (a synopsis may show placeholders).
func parseDocLine(args []string) error {
	root := newRootCommand(io.Discard)
	if err := mistypedCommand(root, args); err != nil {
		return err
	}
	cmd, rest, err := root.Find(args)
	if err == nil {
		err = cmd.ParseFlags(rest)
	}
	if err == nil && cmd.Args != nil {
		err = cmd.Args(cmd, cmd.Flags().Args())
	}
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, bad := range []string{"unknown flag", "unknown shorthand", "unknown command", "flag needs an argument", "invalid argument"} {
		if strings.Contains(msg, bad) {
			return err
		}
	}
	return nil
}

// TestMistypedCommands: a mistyped command, at the top or under list,
// serve or delete, is said to be one, with the closest command, even when
// flags follow it (cobra would complain about them first).
func TestMistypedCommands(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{"lsit operators", `unknown command "lsit" for "gapmirror": did you mean "list"?`},
		{"serv --root /srv", `unknown command "serv" for "gapmirror": did you mean "serve"?`},
		{"list operatros --catalog registry.example.com/index:v1", `unknown command "operatros" for "gapmirror list": did you mean "operators"?`},
		{"serve gcc --root /srv", `unknown command "gcc" for "gapmirror serve": did you mean "gc"?`},
	} {
		var stderr strings.Builder
		code := run(context.Background(), strings.Fields(c.line), io.Discard, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("gapmirror %s: exit %d, want 1 and %q:\n%s", c.line, code, c.want, stderr.String())
		}
	}
}

type docLine struct {
	line int
	args []string
}

// docCommandLines extracts the gapmirror invocations of fenced code blocks:
// continuation lines joined, comments, prompts, environment assignments,
// redirections and what follows a pipe or && dropped, quotes honoured.
func docCommandLines(doc string) []docLine {
	var out []docLine
	in := false
	var pending string
	start := 0
	for i, raw := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(raw), "```") {
			in = !in
			pending = ""
			continue
		}
		if !in {
			continue
		}
		line := raw
		if pending != "" {
			line = pending + " " + strings.TrimSpace(raw)
		} else {
			start = i + 1
		}
		if strings.HasSuffix(strings.TrimSpace(line), `\`) {
			pending = strings.TrimSuffix(strings.TrimSpace(line), `\`)
			continue
		}
		pending = ""
		words := shellWords(line)
		for len(words) > 0 && (words[0] == "$" || words[0] == "#" || strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-")) {
			words = words[1:]
		}
		if len(words) < 2 || words[0] != "gapmirror" {
			continue
		}
		var args []string
		for _, w := range words[1:] {
			if w == "|" || w == "&&" || w == ";" || w == "||" || w == "#" || strings.HasPrefix(w, ">") || strings.HasPrefix(w, "<") || strings.HasPrefix(w, "2>") {
				break
			}
			// A synopsis's optional parts: [--flag VALUE].
			w = strings.TrimSuffix(strings.TrimPrefix(w, "["), "]")
			if w == "" || w == "…" || w == "..." {
				continue
			}
			args = append(args, w)
		}
		out = append(out, docLine{line: start, args: args})
	}
	return out
}

// shellWords splits a line as a shell would (single and double quotes,
// a # starting a comment as a word of its own).
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			return append(words, "#")
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
