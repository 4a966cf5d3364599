package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/internal/releasetest"
)

// graphService serves update graphs for a few 4.17/4.18 channels on
// 127.0.0.1 and returns its graph URL.
func graphService(t *testing.T, missingStatus int) string {
	t.Helper()
	gs := releasetest.NewGraphServer()
	gs.MissingStatus = missingStatus
	put := func(channel, arch string, versions ...string) {
		if err := gs.Put(channel, releasetest.NewGraph(arch, versions...).GenerateEdges()); err != nil {
			t.Fatal(err)
		}
	}
	// Node order is deliberately not version order.
	put("stable-4.18", "amd64", "4.18.2", "4.17.9", "4.18.10", "4.18.1", "4.17.10")
	put("fast-4.18", "amd64", "4.18.2", "4.18.1", "4.18.3", "4.17.10")
	put("candidate-4.18", "amd64", "4.18.0-rc.1", "4.18.3", "4.18.1", "4.18.2", "4.18.4")
	put("stable-4.18", "arm64", "4.18.1")
	srv := httptest.NewServer(gs)
	t.Cleanup(srv.Close)
	return srv.URL + "/graph"
}

// gapmirrorRun runs the CLI in-process and returns its exit code and output.
func gapmirrorRun(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestListReleases(t *testing.T) {
	t.Parallel()
	url := graphService(t, 0)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"channel versions and head", []string{"--channel", "stable-4.18"},
			"# channel stable-4.18, arch amd64: 5 releases, head 4.18.10\n4.17.9\n4.17.10\n4.18.1\n4.18.2\n4.18.10\n"},
		{"channel of one minor", []string{"--channel", "stable-4.18", "--version", "4.17"},
			"# channel stable-4.18, arch amd64: 2 4.17.z releases, head 4.17.10\n4.17.9\n4.17.10\n"},
		{"channel for another arch", []string{"--channel", "stable-4.18", "--arch", "aarch64"},
			"# channel stable-4.18, arch arm64: 1 release, head 4.18.1\n4.18.1\n"},
		{"channels of a minor", []string{"--version", "4.18"},
			"# channels of 4.18, arch amd64: channel, releases, head\ncandidate-4.18    5  4.18.4\nfast-4.18         4  4.18.3\nstable-4.18       5  4.18.10\n"},
		{"channel names of a minor", []string{"--version", "4.18", "--channels"},
			"# channels of 4.18, arch amd64\ncandidate-4.18\nfast-4.18\nstable-4.18\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := gapmirrorRun(append([]string{"list", "releases", "--graph-url", url}, c.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if out != c.want {
				t.Errorf("output:\n%s\nwant:\n%s", out, c.want)
			}
		})
	}
}

func TestListReleasesJSON(t *testing.T) {
	t.Parallel()
	url := graphService(t, 0)
	code, out, errOut := gapmirrorRun("list", "releases", "--graph-url", url, "--channel", "candidate-4.18", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var ch struct {
		Channel, Arch, Type, Head string
		Versions                  []string
	}
	if err := json.Unmarshal([]byte(out), &ch); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if ch.Channel != "candidate-4.18" || ch.Arch != "amd64" || ch.Type != "ocp" || ch.Head != "4.18.4" ||
		strings.Join(ch.Versions, " ") != "4.18.0-rc.1 4.18.1 4.18.2 4.18.3 4.18.4" {
		t.Errorf("listing %+v", ch)
	}

	code, out, errOut = gapmirrorRun("list", "releases", "--graph-url", url, "--version", "4.18", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var minor struct {
		Version  string
		Channels []struct{ Channel, Head string }
	}
	if err := json.Unmarshal([]byte(out), &minor); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if minor.Version != "4.18" || len(minor.Channels) != 3 || minor.Channels[2].Channel != "stable-4.18" || minor.Channels[2].Head != "4.18.10" {
		t.Errorf("listing %+v", minor)
	}
}

func TestListReleasesUpdateURLOverride(t *testing.T) {
	t.Setenv("UPDATE_URL_OVERRIDE", graphService(t, 0))
	code, out, errOut := gapmirrorRun("list", "releases", "--channel", "fast-4.18")
	if code != 0 || !strings.HasPrefix(out, "# channel fast-4.18, arch amd64: 4 releases, head 4.18.3\n") {
		t.Errorf("exit %d, output:\n%s%s", code, out, errOut)
	}
}

func TestListReleasesErrors(t *testing.T) {
	t.Parallel()
	url := graphService(t, 0)
	url404 := graphService(t, http.StatusNotFound)
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/graph"
	l.Close()

	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown channel", []string{"--graph-url", url, "--channel", "stable-9.99"},
			[]string{"channel stable-9.99 has no releases for arch amd64", url, "--version X.Y"}},
		{"unknown channel, 404", []string{"--graph-url", url404, "--channel", "stable-9.99"},
			[]string{"stable-9.99", "no releases", "404"}},
		{"minor without channels", []string{"--graph-url", url, "--version", "4.99"},
			[]string{"no channel of 4.99 has releases for arch amd64"}},
		{"minor not in channel", []string{"--graph-url", url, "--channel", "fast-4.18", "--version", "4.16"},
			[]string{"channel fast-4.18 has no 4.16.z release", "4.17.10 to 4.18.3"}},
		{"unreachable update service", []string{"--graph-url", closed, "--channel", "stable-4.18"},
			[]string{"fetching update graph of channel stable-4.18", "UPDATE_URL_OVERRIDE"}},

		{"--channels without --version", []string{"--graph-url", url, "--channels"}, []string{"add --version"}},
		{"bad arch", []string{"--channel", "stable-4.18", "--arch", "sparc"}, []string{"--arch", `"sparc"`}},
		{"bad version", []string{"--version", "four"}, []string{"--version", "X.Y"}},
		{"bad output", []string{"--channel", "stable-4.18", "-o", "yaml"}, []string{"--output", "text or json"}},
		{"bad channel type", []string{"--channel", "stable-4.18", "--channel-type", "rhel"}, []string{"--channel-type", "ocp or okd"}},
		{"okd minor", []string{"--version", "4.18", "--channel-type", "okd"}, []string{"OKD channels", "--channel"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := gapmirrorRun(append([]string{"list", "releases"}, c.args...)...)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if out != "" {
				t.Errorf("printed on stdout:\n%s", out)
			}
			for _, s := range c.want {
				if !strings.Contains(errOut, s) {
					t.Errorf("error does not mention %q:\n%s", s, errOut)
				}
			}
		})
	}
}
