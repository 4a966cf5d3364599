package fbc

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Range is a set of versions, parsed from one of the two range dialects OLM uses.
type Range struct {
	text  string
	match func(*semver.Version) bool
}

// String returns the range as it was written.
func (r Range) String() string { return r.text }

// Contains reports whether v is in the range. A nil version is never in a range.
func (r Range) Contains(v *semver.Version) bool {
	if v == nil || r.match == nil {
		return false
	}
	return r.match(v)
}

// ParseVersionRange parses a range in the OLM v1 dialect (ClusterExtension
// spec.source.catalog.version): comparisons (=, !=, >, >=, <, <=) joined by
// commas or spaces (AND) and "||" (OR), tilde (~1.2), caret (^1.2), x/X/*
// wildcards and hyphen ranges (1.2 - 1.4). It is the Masterminds/semver
// constraint syntax that OLM v1 itself evaluates, so prerelease versions only
// match when a comparison in the same AND group names a prerelease, as in OLM v1.
func ParseVersionRange(s string) (Range, error) {
	text := strings.TrimSpace(s)
	if text == "" {
		return Range{}, fmt.Errorf("empty version range")
	}
	c, err := semver.NewConstraint(text)
	if err != nil {
		return Range{}, fmt.Errorf("invalid version range %q: %w", s, err)
	}
	return Range{text: s, match: c.Check}, nil
}

// ParseSkipRange parses a range in the dialect OLM v0 uses for channel entry
// skipRange and for olm.package.required versionRange (blang/semver): comparisons
// (=, ==, !=, !, >, >=, <, <=) separated by spaces (AND) and "||" (OR); x
// wildcards in the version ("1.2.x", ">=1.x"). Prerelease versions compare by
// plain semver precedence, as in OLM v0. Versions may omit minor and patch.
func ParseSkipRange(s string) (Range, error) {
	text := strings.TrimSpace(s)
	if text == "" {
		return Range{}, fmt.Errorf("empty range")
	}
	var alternatives [][]comparison
	for _, group := range strings.Split(text, "||") {
		fields := joinOperators(strings.Fields(group))
		if len(fields) == 0 {
			return Range{}, fmt.Errorf("invalid range %q: empty alternative around \"||\"", s)
		}
		var all []comparison
		for _, f := range fields {
			cs, err := parseComparison(f)
			if err != nil {
				return Range{}, fmt.Errorf("invalid range %q: %w", s, err)
			}
			all = append(all, cs...)
		}
		alternatives = append(alternatives, all)
	}
	return Range{text: s, match: func(v *semver.Version) bool {
		for _, all := range alternatives {
			ok := true
			for _, c := range all {
				if !c.holds(v) {
					ok = false
					break
				}
			}
			if ok {
				return true
			}
		}
		return false
	}}, nil
}

// joinOperators glues a lone operator token ("> =", ">= 1.0") to the version after it.
func joinOperators(fields []string) []string {
	out := fields[:0:0]
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if strings.Trim(f, "<>=!") == "" && i+1 < len(fields) {
			f += fields[i+1]
			i++
		}
		out = append(out, f)
	}
	return out
}

type comparison struct {
	op string
	v  *semver.Version
	hi *semver.Version // upper bound of "outside"
}

func (c comparison) holds(v *semver.Version) bool {
	d := v.Compare(c.v)
	switch c.op {
	case "outside":
		return d < 0 || v.Compare(c.hi) >= 0
	case ">":
		return d > 0
	case ">=":
		return d >= 0
	case "<":
		return d < 0
	case "<=":
		return d <= 0
	case "!=":
		return d != 0
	default:
		return d == 0
	}
}

// parseComparison parses one blang comparison, expanding x wildcards the way blang does.
func parseComparison(s string) ([]comparison, error) {
	i := strings.IndexFunc(s, func(r rune) bool { return !strings.ContainsRune("<>=!", r) })
	if i < 0 {
		return nil, fmt.Errorf("%q has no version", s)
	}
	op, ver := s[:i], s[i:]
	switch op {
	case "", "=", "==":
		op = "="
	case "!", "!=":
		op = "!="
	case ">", ">=", "<", "<=":
	default:
		return nil, fmt.Errorf("unknown operator %q in %q", op, s)
	}
	ver = strings.TrimPrefix(ver, "v")
	core, rest := ver, ""
	if j := strings.IndexAny(ver, "-+"); j >= 0 {
		core, rest = ver[:j], ver[j:]
	}
	parts := strings.Split(core, ".")
	if len(parts) > 3 {
		return nil, fmt.Errorf("%q is not a version", ver)
	}
	wild := -1 // index of the first wildcard part
	nums := make([]uint64, 3)
	for k, p := range parts {
		if p == "x" || p == "X" || p == "*" {
			if wild < 0 {
				wild = k
			}
			continue
		}
		if wild >= 0 {
			return nil, fmt.Errorf("%q: a number follows a wildcard", ver)
		}
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a version", ver)
		}
		nums[k] = n
	}
	if wild < 0 && len(parts) < 3 {
		wild = len(parts) // "1.2" is read as "1.2.x" would be for =, else as 1.2.0
		if op != "=" && op != "!=" {
			wild = -1
		}
	}
	if wild == 0 {
		// "*" or "x": every version (for != nothing).
		if op == "!=" || op == "<" {
			return []comparison{{op: "<", v: semver.New(0, 0, 0, "", "")}}, nil
		}
		return []comparison{{op: ">=", v: semver.New(0, 0, 0, "", "")}}, nil
	}
	if wild < 0 {
		if rest == "" {
			return []comparison{{op: op, v: semver.New(nums[0], nums[1], nums[2], "", "")}}, nil
		}
		v, err := semver.StrictNewVersion(fmt.Sprintf("%d.%d.%d%s", nums[0], nums[1], nums[2], rest))
		if err != nil {
			return nil, fmt.Errorf("%q is not a version: %w", ver, err)
		}
		return []comparison{{op: op, v: v}}, nil
	}
	if rest != "" {
		return nil, fmt.Errorf("%q: a wildcard version cannot carry a prerelease or build", ver)
	}
	low := semver.New(nums[0], nums[1], 0, "", "")
	var high *semver.Version
	if wild == 1 {
		low = semver.New(nums[0], 0, 0, "", "")
		high = semver.New(nums[0]+1, 0, 0, "", "")
	} else {
		high = semver.New(nums[0], nums[1]+1, 0, "", "")
	}
	switch op {
	case ">":
		return []comparison{{op: ">=", v: high}}, nil
	case ">=":
		return []comparison{{op: ">=", v: low}}, nil
	case "<":
		return []comparison{{op: "<", v: low}}, nil
	case "<=":
		return []comparison{{op: "<", v: high}}, nil
	case "!=":
		// blang turns "!=1.2.x" into "<1.2.0 >=1.3.0", which no version satisfies;
		// the intent is plainly "outside 1.2.x".
		return []comparison{{op: "outside", v: low, hi: high}}, nil
	default:
		return []comparison{{op: ">=", v: low}, {op: "<", v: high}}, nil
	}
}
