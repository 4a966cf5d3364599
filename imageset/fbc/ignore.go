package fbc

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// indexIgnoreFile names the files that exclude paths from a catalog tree, as opm reads them.
const indexIgnoreFile = ".indexignore"

// ignorePattern is one line of an .indexignore file, with gitignore meaning,
// scoped to the directory holding the file (its domain).
type ignorePattern struct {
	domain   []string
	parts    []string
	include  bool // "!pattern": re-include
	dirOnly  bool // "pattern/": directories only
	anchored bool // contains a slash: matched against the path from the domain
}

// ignoreMatcher decides which files opm skips: the last pattern that matches
// a path wins, as in .gitignore, and every .indexignore file is skipped itself.
type ignoreMatcher struct {
	patterns []ignorePattern
}

// newIgnoreMatcher reads every .indexignore file under fsys, in walk order.
func newIgnoreMatcher(fsys fs.FS) (*ignoreMatcher, error) {
	m := &ignoreMatcher{patterns: []ignorePattern{parseIgnorePattern(indexIgnoreFile, nil)}}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() != indexIgnoreFile {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		var domain []string
		if dir := path.Dir(p); dir != "." {
			domain = strings.Split(dir, "/")
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			m.patterns = append(m.patterns, parseIgnorePattern(line, domain))
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("reading %s: %w", p, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func parseIgnorePattern(line string, domain []string) ignorePattern {
	p := ignorePattern{domain: domain}
	if strings.HasPrefix(line, "!") {
		p.include = true
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		p.dirOnly = true
		line = strings.TrimSuffix(line, "/")
	}
	p.anchored = strings.Contains(line, "/")
	p.parts = strings.Split(line, "/")
	return p
}

// ignored reports whether the file at p (slash-separated, relative to the
// catalog root) is excluded.
func (m *ignoreMatcher) ignored(p string, isDir bool) bool {
	parts := strings.Split(p, "/")
	for i := len(m.patterns) - 1; i >= 0; i-- {
		pat := &m.patterns[i]
		if pat.matches(parts, isDir) {
			return !pat.include
		}
	}
	return false
}

func (p *ignorePattern) matches(parts []string, isDir bool) bool {
	if len(parts) <= len(p.domain) {
		return false
	}
	for i, d := range p.domain {
		if parts[i] != d {
			return false
		}
	}
	parts = parts[len(p.domain):]
	if p.anchored {
		return p.globMatch(parts, isDir)
	}
	return p.nameMatch(parts, isDir)
}

// nameMatch matches a pattern without a slash against any path component.
func (p *ignorePattern) nameMatch(parts []string, isDir bool) bool {
	for i, name := range parts {
		ok, err := path.Match(p.parts[0], name)
		if err != nil {
			return false
		}
		if !ok {
			continue
		}
		if p.dirOnly && !isDir && i == len(parts)-1 {
			return false
		}
		return true
	}
	return false
}

// globMatch matches a pattern with slashes component by component, "**"
// standing for any number of directories; a match of a leading part of the
// path matches everything below it.
func (p *ignorePattern) globMatch(parts []string, isDir bool) bool {
	matched, traverse := false, false
parts:
	for i, pat := range p.parts {
		switch {
		case pat == "":
			traverse = false
			continue
		case pat == "**":
			if i == len(p.parts)-1 {
				break parts
			}
			traverse = true
			continue
		case strings.Contains(pat, "**"):
			return false
		case len(parts) == 0:
			return false
		}
		if traverse {
			traverse = false
			found := false
			for len(parts) > 0 {
				name := parts[0]
				parts = parts[1:]
				ok, err := path.Match(pat, name)
				if err != nil {
					return false
				}
				if ok {
					found = true
					break
				}
			}
			if !found {
				return false
			}
			matched = true
			continue
		}
		ok, err := path.Match(pat, parts[0])
		if err != nil || !ok {
			return false
		}
		matched = true
		parts = parts[1:]
	}
	if matched && p.dirOnly && !isDir && len(parts) == 0 {
		return false
	}
	return matched
}
