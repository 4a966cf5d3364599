package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/internal/s3fake"
)

// serveS3 is scenario F (-serve-s3): disk-to-mirror of one archive into
// gapmirror serve on the filesystem (one replica) and into two gapmirror
// serve replicas on S3-compatible object storage (gofakes3 in this process,
// distribution's S3 driver speaking S3 over HTTP to it) with a Redis
// blob-descriptor cache (miniredis), behind a round-robin balancer, in the
// same run. Each push is checked by a rerun into the other replica (every
// image found by digest, nothing copied).
func (b *bench) serveS3(ctx context.Context, size int64, n int) error {
	dir := filepath.Join(b.dir, "scenario-f")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := size / 4
	own := (size - base) / int64(n)
	fmt.Printf("\nScenario F, serve on object storage: %d images, a %s base layer shared by all and %s of their own each\n", n, humanBytes(base), humanBytes(own))
	up, err := b.registry(ctx, "f-upstream")
	if err != nil {
		return err
	}
	fleet := imagebuilder.Fleet{Count: n, Seed: 43, RepoPrefix: "bench/app-", Tag: "v1", BaseLayerSize: base, UniqueLayerSize: own}
	images, err := fleet.Build()
	if err != nil {
		return err
	}
	if err := imagebuilder.PushFleet(ctx, imagebuilder.Target{URL: up.URL(), Client: up.Client()}, images); err != nil {
		return err
	}
	unique := imagebuilder.DistinctBytes(images)
	var refs []string
	for _, fi := range images {
		refs = append(refs, fi.Ref(up.Host()))
	}
	isc := filepath.Join(dir, "isc.yaml")
	if err := writeConfig(isc, refs); err != nil {
		return err
	}
	// One archive, copied for each push (each archive directory keeps the
	// records of its own pushes).
	archives := []string{filepath.Join(dir, "archive-fs"), filepath.Join(dir, "archive-s3")}
	if _, _, err := b.gapmirror(ctx, "F mirror-to-disk", "mirror", "-c", isc, "file://"+archives[0]); err != nil {
		return err
	}
	chunks, _ := filepath.Glob(filepath.Join(archives[0], "mirror_*.tar"))
	if err := os.MkdirAll(archives[1], 0o755); err != nil {
		return err
	}
	for _, c := range chunks {
		if _, err := copyFile(c, filepath.Join(archives[1], filepath.Base(c)), false); err != nil {
			return err
		}
	}

	// Users: alice, in an htpasswd file all the registries share.
	htpasswd := filepath.Join(dir, "htpasswd")
	cmd := exec.CommandContext(ctx, b.bin, "serve", "htpasswd", "--file", htpasswd, "alice")
	cmd.Stdin = strings.NewReader("s3cret\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("serve htpasswd: %v: %s", err, out)
	}
	store, err := s3fake.Start("mirror")
	if err != nil {
		return err
	}
	defer store.Close()
	redis, err := s3fake.StartRedis()
	if err != nil {
		return err
	}
	defer redis.Close()
	// gofakes3 v1.2.0 does not do UploadPartCopy (it answers 411
	// MissingContentLength), which the driver uses to move a blob of
	// multipartcopythresholdsize (32 MiB) or more into place: moves are
	// single CopyObject requests here.
	conf := filepath.Join(dir, "registry.yml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("version: 0.1\nhttp:\n  secret: bench-shared-secret\nstorage:\n  s3:\n    region: %s\n    regionendpoint: %s\n    forcepathstyle: true\n    bucket: mirror\n    accesskey: %s\n    secretkey: %s\n    rootdirectory: /registry\n    multipartcopythresholdsize: 5368709120\n  redirect:\n    disable: true\n  cache:\n    blobdescriptor: redis\nredis:\n  addrs: [%s]\n",
		s3fake.Region, store.Endpoint, store.AccessKey, store.SecretKey, redis.Addr())), 0o644); err != nil {
		return err
	}
	fs, err := b.startServe(ctx, filepath.Join(dir, "fs"), htpasswd, "")
	if err != nil {
		return err
	}
	defer fs.stop()
	a, err := b.startServe(ctx, filepath.Join(dir, "s3-a"), htpasswd, conf)
	if err != nil {
		return err
	}
	defer a.stop()
	r2, err := b.startServe(ctx, filepath.Join(dir, "s3-b"), htpasswd, conf)
	if err != nil {
		return err
	}
	defer r2.stop()
	lb, err := registrytest.StartRoundRobin(a.addr, r2.addr)
	if err != nil {
		return err
	}
	defer lb.Close()
	auth := base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	var entries []string
	for _, h := range []string{fs.addr, a.addr, r2.addr, lb.Host} {
		entries = append(entries, fmt.Sprintf("%q:{\"auth\":%q}", h, auth))
	}
	if err := os.WriteFile(b.authFile, []byte(`{"auths":{`+strings.Join(entries, ",")+"}}\n"), 0o600); err != nil {
		return err
	}

	check := func(label, archive, host string, want counts) (time.Duration, error) {
		took, c, err := b.gapmirror(ctx, label, "mirror", "--from", "file://"+archive, "docker://"+host)
		if err != nil {
			return took, err
		}
		if c.copied != want.copied || c.there != want.there || c.failed != 0 {
			return took, fmt.Errorf("%s: %d copied, %d already there, %d failed; want %d, %d, 0 (log: %s)", label, c.copied, c.there, c.failed, want.copied, want.there, b.log.Name())
		}
		return took, nil
	}
	fsTook, err := check("F disk-to-mirror, one replica on the filesystem", archives[0], fs.addr, counts{copied: n})
	if err != nil {
		return err
	}
	s3Before := store.Requests.Load()
	s3Took, err := check("F disk-to-mirror, two replicas on S3", archives[1], lb.Host, counts{copied: n})
	if err != nil {
		return err
	}
	s3Requests := store.Requests.Load() - s3Before
	// Verification through the other replica: every image is found there by digest.
	if _, err := check("F check through replica b", archives[1], r2.addr, counts{there: n}); err != nil {
		return err
	}
	mbps := func(d time.Duration) float64 { return mib(unique) / d.Seconds() }
	fmt.Printf("  %s of unique blobs; the same archive pushed with gapmirror mirror --from, in this run:\n", humanBytes(unique))
	fmt.Printf("  %-62s %7.2fs  %6.1f MiB/s\n", "disk-to-mirror into 1 serve, filesystem storage", fsTook.Seconds(), mbps(fsTook))
	fmt.Printf("  %-62s %7.2fs  %6.1f MiB/s\n", "disk-to-mirror into 2 serve replicas, S3 (gofakes3) + Redis", s3Took.Seconds(), mbps(s3Took))
	fmt.Printf("      balancer: %d and %d requests to the replicas; %d S3 requests\n", lb.Hits[0].Load(), lb.Hits[1].Load(), s3Requests)
	fmt.Printf("  ratio (two replicas on S3 / one on the filesystem): %.2f\n", s3Took.Seconds()/fsTook.Seconds())
	fmt.Println("  (gofakes3 keeps objects in memory in this process: the figure is the cost of the S3 protocol, the driver and the replicas, not of a real store's disks and network)")
	return nil
}

// servedProcess is a gapmirror serve the bench started.
type servedProcess struct {
	cmd    *exec.Cmd
	addr   string
	out    *bytes.Buffer
	exited chan error
}

// startServe starts gapmirror serve --plain-http on a free loopback port
// and waits until it answers.
func (b *bench) startServe(ctx context.Context, root, htpasswd, conf string) (*servedProcess, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	args := []string{"serve", "--root", root, "--address", addr, "--plain-http", "--htpasswd", htpasswd}
	if conf != "" {
		args = append(args, "--registry-config", conf)
	}
	p := &servedProcess{addr: addr, out: &bytes.Buffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(b.bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.exited <- p.cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case err := <-p.exited:
			return nil, fmt.Errorf("gapmirror %s exited: %v\n%s", strings.Join(args, " "), err, p.out)
		case <-time.After(50 * time.Millisecond):
		}
		if resp, err := http.Get("http://" + addr + "/v2/"); err == nil {
			_ = resp.Body.Close()
			return p, nil
		}
	}
	p.stop()
	return nil, fmt.Errorf("gapmirror %s does not answer after 30s:\n%s", strings.Join(args, " "), p.out)
}

// stop sends SIGINT and waits for the exit (killing it after 15s).
func (p *servedProcess) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}
