package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// -wan DELAY:RATE puts the upstream of scenarios A, B and E behind a WAN
// (registrytest.WAN: a delay per request, one link of RATE shared by every
// response body) for the trips that read upstream: mirror-to-disk,
// mirror-to-mirror and their no-change reruns, the same mirror-to-disk
// twice more (the upstream given by the TLS flag, then by a registries.conf
// entry), and scenario E's skopeo baselines. Each of them prints its floors
// under the WAN.

// wanRE is DELAY:RATE, RATE a number of bit, kbit, mbit or gbit (per second).
var wanRE = regexp.MustCompile(`^([^:]+):([0-9]+(?:\.[0-9]+)?)([kmg]?)(?:bit|bps)(?:/s)?$`)

// parseWAN parses -wan: "40ms:200mbit" is 40 ms per request and 200 Mbit/s
// (25,000,000 bytes/s) shared.
func parseWAN(s string) (delay time.Duration, bytesPerSecond float64, err error) {
	bad := func(why string) error {
		return fmt.Errorf("-wan %q: %s; want DELAY:RATE, a delay per request and a link rate, such as 40ms:200mbit or 20ms:1gbit (RATE in bit, kbit, mbit or gbit per second)", s, why)
	}
	m := wanRE.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil {
		if !strings.Contains(s, ":") {
			return 0, 0, bad("no colon between the delay and the rate")
		}
		return 0, 0, bad("the rate is not a number of bit, kbit, mbit or gbit")
	}
	if delay, err = time.ParseDuration(m[1]); err != nil {
		return 0, 0, bad(fmt.Sprintf("the delay %q is not a duration (40ms, 0.2s)", m[1]))
	}
	if delay < 0 || delay > 10*time.Second {
		return 0, 0, bad(fmt.Sprintf("the delay %v is outside 0 to 10s", delay))
	}
	bits, err := strconv.ParseFloat(m[2], 64)
	if err != nil {
		return 0, 0, bad(err.Error())
	}
	bits *= map[string]float64{"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m[3]]
	if bits < 8e3 || bits > 100e9 {
		return 0, 0, bad(fmt.Sprintf("the rate %s bit/s is outside 8kbit to 100gbit", strconv.FormatFloat(bits, 'f', -1, 64)))
	}
	return delay, bits / 8, nil
}

// wanFront is the switch in front of an upstream registry: requests go
// through the WAN while wanOn is set, straight to the registry otherwise
// (building the upstream, the trips that do not read it).
func (b *bench) wanFront(next http.Handler) http.Handler {
	wanned := b.wan.Wrap(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b.wanOn.Load() {
			wanned.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// underWAN turns the WAN on (when there is one and on) or off for the
// next runs.
func (b *bench) underWAN(on bool) {
	if b.wan != nil {
		b.wanOn.Store(on)
	}
}

// sourceConfig is how a gapmirror run is told about the plain-HTTP
// upstream: by --src-tls-verify=false (the bench's default), or as the
// containers tools are told, by a registries.conf entry marking its host
// insecure.
type sourceConfig struct {
	// regsConf replaces the bench's empty registries.conf ("": keep it).
	regsConf string
	// noTLSFlag leaves --src-tls-verify=false out.
	noTLSFlag bool
}

// insecureConf writes a registries.conf into dir marking host insecure,
// and nothing else.
func insecureConf(dir, host string) (string, error) {
	path := filepath.Join(dir, "registries-insecure.conf")
	data := fmt.Sprintf("# The upstream, as the containers tools are told about a registry without TLS.\n[[registry]]\nlocation = %q\ninsecure = true\n", host)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}

// defaultParallelImages is gapmirror's --parallel-images default.
const defaultParallelImages = 8

// parallelImages is the --parallel-images of args, else the default.
func parallelImages(args []string) int {
	for i, a := range args {
		v, ok := strings.CutPrefix(a, "--parallel-images=")
		if !ok && a == "--parallel-images" && i+1 < len(args) {
			v, ok = args[i+1], true
		}
		if n, err := strconv.Atoi(v); ok && err == nil && n > 0 {
			return n
		}
	}
	return defaultParallelImages
}

// wanFloors are a run's floors under the WAN: the bytes it read through
// the link ÷ the rate; its requests × the delay ÷ the most it had in
// flight at once (a true floor: no more were ever in flight) and ÷ its
// --parallel-images (what its configuration would reach, every slot busy);
// the larger of the bytes floor and the first request floor.
type wanFloors struct {
	bytes, requests, requestsPar, floor float64
}

func (b *bench) floorsOf(r tripResult) wanFloors {
	w := r.wan
	var f wanFloors
	if w == nil {
		return f
	}
	f.bytes = float64(w.Bytes) / b.wan.Rate()
	reqSecs := float64(w.Requests) * b.wan.Delay().Seconds()
	f.requests = reqSecs / float64(max(w.PeakInFlight, 1))
	f.requestsPar = reqSecs / float64(max(r.parallel, 1))
	f.floor = max(f.bytes, f.requests)
	return f
}

// wanLines says what a run did through the WAN, and its floors.
func (b *bench) wanLines(r tripResult) string {
	w, f := r.wan, b.floorsOf(r)
	mean := w.Busy.Seconds() / max(r.row.took.Seconds(), 1e-6)
	out := fmt.Sprintf("WAN %s: %d requests, at most %d in flight (mean %.1f), %s read, %d connections (%d without a request)\n"+
		"      floors: bytes %.2fs, requests %.2fs (÷ %d at most in flight), %.2fs (÷ %d --parallel-images); %.2f× the floor",
		b.wanSpec, w.Requests, w.PeakInFlight, mean, humanBytes(w.Bytes), w.Connections, w.NoRequest,
		f.bytes, f.requests, w.PeakInFlight, f.requestsPar, r.parallel, r.row.took.Seconds()/max(f.floor, 1e-6))
	if c := r.counts.copySecs; c > 0 && f.bytes > 0.01 {
		// The summary's copy phase: what the blobs took, against the link.
		out += fmt.Sprintf("\n      copy phase %.1fs, %.2f× the bytes floor; the rest (start, resolution, planning, archive) %.1fs", c, c/f.bytes, r.row.took.Seconds()-c)
	}
	return out
}

// printWAN prints the floors of the trips that ran under the WAN, the
// registries.conf source against the flag's, and the ratios.
func (b *bench) printWAN(t *trips, extra ...tripResult) {
	if b.wan == nil {
		return
	}
	fmt.Printf("  under the WAN (%s: %v per request, %.1f MiB/s shared by every response body; the loopback floors above do not apply to these runs):\n",
		b.wanSpec, b.wan.Delay(), b.wan.Rate()/(1<<20))
	fmt.Printf("  %-66s %7s %9s %8s %9s %5s %5s %9s %9s %8s %11s\n", "trip", "s", "read", "bytes s", "requests", "peak", "mean", "req s ÷pk", "req s ÷P", "× floor", "conns (no req)")
	runs := slices.Concat([]tripResult{t.m2d, t.m2m, t.m2dAgain, t.m2mAgain}, t.wanFlag, t.wanConf, extra)
	for _, r := range runs {
		if r.wan == nil {
			continue
		}
		f, w := b.floorsOf(r), r.wan
		fmt.Printf("  %-66s %7.2f %9s %8.2f %9d %5d %5.1f %9.2f %9.2f %8.2f %6d (%d)\n", r.row.op, r.row.took.Seconds(), humanBytes(w.Bytes),
			f.bytes, w.Requests, w.PeakInFlight, w.Busy.Seconds()/max(r.row.took.Seconds(), 1e-6), f.requests, f.requestsPar,
			r.row.took.Seconds()/max(f.floor, 1e-6), w.Connections, w.NoRequest)
	}
	fmt.Println("  bytes s = bytes read through the link ÷ its rate; req s ÷pk = requests × delay ÷ the most in flight at once (a floor: never more")
	fmt.Println("  were in flight); req s ÷P = requests × delay ÷ --parallel-images; × floor = seconds ÷ max(bytes s, req s ÷pk); mean = requests'")
	fmt.Println("  time in flight ÷ seconds. Connections without a request are TLS handshakes tried against the plain-HTTP upstream (or")
	fmt.Println("  connections dropped unused): the WAN delays requests only, where a real one charges a round trip per connection and more per handshake.")
	if len(t.wanFlag) > 0 && len(t.wanFlag) == len(t.wanConf) {
		var flag, conf float64
		var each []string
		for i := range t.wanFlag {
			flag += t.wanFlag[i].row.took.Seconds()
			conf += t.wanConf[i].row.took.Seconds()
			each = append(each, fmt.Sprintf("%.2fs", t.wanFlag[i].row.took.Seconds()))
		}
		for i := range t.wanConf {
			each = append(each, fmt.Sprintf("%.2fs", t.wanConf[i].row.took.Seconds()))
		}
		f, c := t.wanFlag[0].wan, t.wanConf[0].wan
		fmt.Printf("  mirror-to-disk, upstream by a registries.conf entry (insecure = true, no TLS flag) ÷ by --src-tls-verify=false: %.2f (issue 26: at most 1.05)\n", conf/max(flag, 1e-6))
		fmt.Printf("      the sum of %d runs each (flag %s, registries.conf %s, run in the order flag, conf, conf, flag);\n", len(t.wanFlag), strings.Join(each[:len(t.wanFlag)], ", "), strings.Join(each[len(t.wanFlag):], ", "))
		fmt.Printf("      requests %d against %d, at most %d in flight against %d, connections %d (%d without a request) against %d (%d)\n",
			c.Requests, f.Requests, c.PeakInFlight, f.PeakInFlight, c.Connections, c.NoRequest, f.Connections, f.NoRequest)
	}
	if t.m2d.wan != nil {
		f := b.floorsOf(t.m2d)
		fmt.Printf("  first mirror-to-disk ÷ its bytes floor: %.2f (issue 26: at most 1.3)", t.m2d.row.took.Seconds()/max(f.bytes, 1e-6))
		if t.m2m.wan != nil && t.d2m.row.took > 0 {
			slower := max(t.m2d.row.took.Seconds(), t.d2m.row.took.Seconds(), 1e-6)
			fmt.Printf("; mirror-to-mirror ÷ the slower of mirror-to-disk and disk-to-mirror: %.2f (at most 1.15)", t.m2m.row.took.Seconds()/slower)
			// The registries run on the same CPUs: what both need of them
			// bounds mirror-to-mirror from below, whatever the copy does.
			cpu := (t.m2m.cpu + t.m2m.registryCPU).Seconds() / float64(runtime.NumCPU())
			fmt.Printf(";\n  its CPU floor here %.2fs ((gapmirror + registries CPU) ÷ %d CPUs), %.2f× that slower trip", cpu, runtime.NumCPU(), cpu/slower)
		}
		fmt.Println()
	}
}
