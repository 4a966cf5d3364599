package archive

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Byte multiples used by ParseSize and in messages.
const (
	kiB int64 = 1 << 10
	miB int64 = 1 << 20
	giB int64 = 1 << 30
	tiB int64 = 1 << 40
)

// defaultMaxChunk is the chunk size limit when none is given: oc-mirror's default archiveSize of 500 GiB.
const defaultMaxChunk = 500 * giB

// minMaxChunk is the smallest chunk size limit Write accepts.
const minMaxChunk = 8 * kiB

var sizeUnits = map[string]int64{
	"b":  1,
	"k":  kiB,
	"kb": 1000,
	"ki": kiB, "kib": kiB,
	"m":  miB,
	"mb": 1000 * 1000,
	"mi": miB, "mib": miB,
	"g":  giB,
	"gb": 1000 * 1000 * 1000,
	"gi": giB, "gib": giB,
	"t":  tiB,
	"tb": 1000 * 1000 * 1000 * 1000,
	"ti": tiB, "tib": tiB,
}

// ParseSize parses an archive size such as "4GiB", "500MiB", "1.5GiB",
// "100MB" or "123". A plain number is GiB, like oc-mirror's archiveSize.
// KB/MB/GB/TB are powers of 1000, KiB/MiB/GiB/TiB (and K/M/G/T) powers of 1024.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	}
	if num == "" {
		return 0, fmt.Errorf("size %q: expected a number with an optional unit, e.g. 4GiB, 500MiB or 10 (GiB)", s)
	}
	mult := giB
	if unit != "" {
		m, ok := sizeUnits[unit]
		if !ok {
			return 0, fmt.Errorf("size %q: unknown unit %q (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", s, t[i:])
		}
		mult = m
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %q is not a number", s, num)
	}
	bytes := v * float64(mult)
	if bytes < 1 {
		return 0, fmt.Errorf("size %q must be at least 1 byte", s)
	}
	if bytes >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(bytes), nil
}

// humanSize renders n bytes for messages: "512 B", "3.2 MiB", "4 GiB".
func humanSize(n int64) string {
	units := []struct {
		size int64
		name string
	}{{tiB, "TiB"}, {giB, "GiB"}, {miB, "MiB"}, {kiB, "KiB"}}
	for _, u := range units {
		if n >= u.size {
			v := float64(n) / float64(u.size)
			if n%u.size == 0 {
				return fmt.Sprintf("%d %s", n/u.size, u.name)
			}
			return fmt.Sprintf("%.1f %s", v, u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// recommendedSize is the smallest whole number of GiB (or MiB below 1 GiB)
// that holds n bytes, rendered for a flag value: "6GiB".
func recommendedSize(n int64) string {
	if n <= giB {
		return fmt.Sprintf("%dMiB", (n+miB-1)/miB)
	}
	return fmt.Sprintf("%dGiB", (n+giB-1)/giB)
}
