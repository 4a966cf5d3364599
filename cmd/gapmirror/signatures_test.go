package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// signedWorld is a world of 6 images (image 3 multi-arch, image 5 named by
// digest) where image 0 and image 5 are signed, and image 3 only in its
// first platform manifest, as publishers that sign per architecture do.
type signedWorld struct {
	*world
	key *ecdsa.PrivateKey
	// sigs maps "repo:sha256-<hex>.sig" to the signature manifest digest.
	sigs map[string]digest.Digest
}

func newSignedWorld(t *testing.T, upOpts registrytest.Options) *signedWorld {
	t.Helper()
	return signWorld(t, newWorld(t, upOpts))
}

// signWorld pushes the signed fleet into the upstream of ww.
func signWorld(t *testing.T, ww *world) *signedWorld {
	t.Helper()
	w := &signedWorld{world: ww, sigs: map[string]digest.Digest{}}
	w.pushFleetTo(w.upTarget(), 6, 8<<10)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	w.key = key
	w.sign(w.images[0].Repo, w.images[0].Digest)
	w.sign(w.images[5].Repo, w.images[5].Digest)
	w.sign(w.images[3].Repo, w.childrenOf(w.images[3])[0])
	return w
}

// sign pushes a cosign signature of repo@d as repo:sha256-<hex>.sig upstream.
func (w *signedWorld) sign(repo string, d digest.Digest) {
	w.t.Helper()
	sig, err := imagebuilder.CosignSignature(w.key, w.up.Host()+"/"+repo, d)
	must(w.t, err)
	tag := "sha256-" + d.Encoded() + ".sig"
	must(w.t, imagebuilder.Push(context.Background(), w.upTarget(), repo, tag, sig))
	w.sigs[repo+":"+tag] = sig.Digest
}

func (w *signedWorld) childrenOf(ex example) []digest.Digest {
	w.t.Helper()
	data, _, err := w.up.Manifest(ex.Repo, ex.Digest.String())
	must(w.t, err)
	var idx ocispec.Index
	must(w.t, json.Unmarshal(data, &idx))
	var out []digest.Digest
	for _, m := range idx.Manifests {
		out = append(out, m.Digest)
	}
	if len(out) == 0 {
		w.t.Fatalf("%s is not an index", ex.Ref)
	}
	return out
}

// assertSignatures checks that every signature upstream is at reg under
// prefix by digest under its tag, complete, and that no other .sig tag is.
func (w *signedWorld) assertSignatures(reg *registrytest.Registry, prefix string, want bool) {
	t := w.t
	t.Helper()
	for name, d := range w.sigs {
		repo, tag, _ := strings.Cut(name, ":")
		repo = strings.TrimPrefix(prefix+"/"+repo, "/")
		got, err := reg.ManifestDigest(repo, tag)
		switch {
		case !want && err == nil:
			t.Errorf("%s:%s is at the mirror though signatures were not to be copied", repo, tag)
		case !want:
		case err != nil:
			t.Errorf("signature %s:%s not at the mirror: %v", repo, tag, err)
		case got != d:
			t.Errorf("signature %s:%s has digest %s, want %s", repo, tag, got, d)
		default:
			w.assertComplete(reg, repo, d)
		}
	}
	// Unsigned images have no signature tag at the mirror.
	for _, ex := range w.images {
		repo := strings.TrimPrefix(prefix+"/"+ex.Repo, "/")
		tags, err := reg.Tags(repo)
		must(t, err)
		for _, tag := range tags {
			if strings.HasSuffix(tag, ".sig") && w.sigs[ex.Repo+":"+tag] == "" {
				t.Errorf("%s:%s at the mirror, but upstream has no such signature", repo, tag)
			}
		}
	}
}

// TestSignaturesThreeTrips: cosign signatures of images and of a platform
// manifest go with their images through mirror-to-disk, disk-to-mirror and
// mirror-to-mirror, are counted apart and stay out of IDMS/ITMS; unsigned
// images are mirrored as before; a rerun skips them.
func TestSignaturesThreeTrips(t *testing.T) {
	t.Parallel()
	w := newSignedWorld(t, registrytest.Options{})
	isc := w.isc("")
	archiveDir := filepath.Join(w.dir, "archive")
	code, out, _ := w.gapmirror("mirror", "-c", isc, "file://"+archiveDir)
	if code != 0 || !strings.Contains(out, "6 copied") || !strings.Contains(out, "signatures: 3 copied") {
		t.Fatalf("mirror-to-disk: exit %d, summary:\n%s", code, out)
	}
	code, out, _ = w.gapmirror("mirror", "-c", isc, "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/d2m")
	if code != 0 || !strings.Contains(out, "signatures: 3 copied") {
		t.Fatalf("disk-to-mirror: exit %d, summary:\n%s", code, out)
	}
	w.assertMirrored(w.dst, "d2m")
	w.assertSignatures(w.dst, "d2m", true)
	for _, f := range []string{"idms-gapmirror.yaml", "itms-gapmirror.yaml"} {
		data, err := os.ReadFile(filepath.Join(archiveDir, "working-dir", "cluster-resources", f))
		if err == nil && strings.Contains(string(data), ".sig") {
			t.Errorf("%s mentions a signature:\n%s", f, data)
		}
	}

	ws := filepath.Join(w.dir, "ws")
	code, out, _ = w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m2m")
	if code != 0 || !strings.Contains(out, "signatures: 3 copied") {
		t.Fatalf("mirror-to-mirror: exit %d, summary:\n%s", code, out)
	}
	w.assertMirrored(w.dst, "m2m")
	w.assertSignatures(w.dst, "m2m", true)
	code, out, _ = w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m2m")
	if code != 0 || !strings.Contains(out, "0 copied, 6 already at the destination") || !strings.Contains(out, "signatures: 0 copied, 3 already at the destination") {
		t.Errorf("no-change rerun: exit %d, summary:\n%s", code, out)
	}
}

// TestSignaturesRemoved: --remove-signatures copies none, on any trip.
func TestSignaturesRemoved(t *testing.T) {
	t.Parallel()
	w := newSignedWorld(t, registrytest.Options{})
	isc := w.isc("")
	code, out, _ := w.gapmirror("mirror", "-c", isc, "--remove-signatures", "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m2m")
	if code != 0 || strings.Contains(out, "signatures:") {
		t.Fatalf("mirror-to-mirror --remove-signatures: exit %d, summary:\n%s", code, out)
	}
	w.assertMirrored(w.dst, "m2m")
	w.assertSignatures(w.dst, "m2m", false)

	// An archive made with signatures, pushed with --remove-signatures.
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+archiveDir); code != 0 {
		t.Fatalf("mirror-to-disk exit %d", code)
	}
	code, _, _ = w.gapmirror("mirror", "--remove-signatures", "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/d2m")
	if code != 0 {
		t.Fatalf("disk-to-mirror --remove-signatures exit %d", code)
	}
	w.assertMirrored(w.dst, "d2m")
	w.assertSignatures(w.dst, "d2m", false)
}

// sigAnswers answers upstream requests for some signature tags the way
// misbehaving registries do: NAME_UNKNOWN instead of MANIFEST_UNKNOWN for
// an absent one, or 503 every time.
type sigAnswers struct {
	nameUnknown, broken string // repository paths
	mu                  sync.Mutex
	requests            map[string]int // method → requests, all paths
}

func (s *sigAnswers) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests[r.Method]++
		s.mu.Unlock()
		path := r.URL.Path
		if strings.HasSuffix(path, ".sig") {
			switch {
			case s.nameUnknown != "" && strings.HasPrefix(path, "/v2/"+s.nameUnknown+"/manifests/"):
				writeError(rw, http.StatusNotFound, "NAME_UNKNOWN", "repository name not known to registry")
				return
			case s.broken != "" && strings.HasPrefix(path, "/v2/"+s.broken+"/manifests/"):
				writeError(rw, http.StatusServiceUnavailable, "UNAVAILABLE", "backend down")
				return
			}
		}
		next.ServeHTTP(rw, r)
	})
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": msg}}})
}

// TestSignaturesUnhelpfulRegistry: a registry answering NAME_UNKNOWN for an
// absent .sig is taken as "no signature"; one failing with 5xx after the
// retries makes a warning, and every image is mirrored all the same.
func TestSignaturesUnhelpfulRegistry(t *testing.T) {
	t.Parallel()
	answers := &sigAnswers{requests: map[string]int{}}
	w := newSignedWorld(t, registrytest.Options{})
	w.up.SetWrap(answers.Wrap)
	answers.nameUnknown, answers.broken = w.images[1].Repo, w.images[2].Repo
	isc := w.isc("")
	code, out, errOut := w.gapmirror("mirror", "-c", isc, "--retry-times", "2", "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m2m")
	if code != 0 || !strings.Contains(out, "6 copied") || !strings.Contains(out, "signatures: 3 copied") {
		t.Fatalf("exit %d, summary:\n%s", code, out)
	}
	if !strings.Contains(errOut, "could not be read") || !strings.Contains(errOut, w.images[2].Repo) || strings.Contains(errOut, w.images[1].Repo+"@") {
		t.Errorf("want one warning, about %s only:\n%s", w.images[2].Repo, errOut)
	}
	w.assertMirrored(w.dst, "m2m")
	w.assertSignatures(w.dst, "m2m", true)
}

// TestSignatureLookupCost measures the upstream requests signatures add to
// mirror-to-mirror runs of 6 images (7 manifests, 3 signed): a first run
// and a no-change rerun, each with and without --remove-signatures.
func TestSignatureLookupCost(t *testing.T) {
	t.Parallel()
	answers := &sigAnswers{requests: map[string]int{}}
	w := newSignedWorld(t, registrytest.Options{})
	w.up.SetWrap(answers.Wrap)
	isc := w.isc("")
	count := func(name string, args ...string) int {
		answers.mu.Lock()
		clear(answers.requests)
		answers.mu.Unlock()
		full := append([]string{"mirror", "-c", isc, "--workspace", "file://" + filepath.Join(w.dir, "ws-"+name)}, args...)
		if code, _, _ := w.gapmirror(append(full, "docker://"+w.dst.Host()+"/"+name)...); code != 0 {
			t.Fatalf("%s: exit %d", name, code)
		}
		answers.mu.Lock()
		defer answers.mu.Unlock()
		n := 0
		for _, c := range answers.requests {
			n += c
		}
		return n
	}
	plainFirst, plainRerun := count("plain", "--remove-signatures"), count("plain", "--remove-signatures")
	sigFirst, sigRerun := count("signed"), count("signed")
	t.Logf("upstream requests for 6 images: first run %d without signatures, %d with (3 signatures copied); no-change rerun %d without, %d with (+%.1f per image)",
		plainFirst, sigFirst, plainRerun, sigRerun, float64(sigRerun-plainRerun)/6)
	// A rerun pays one HEAD per manifest (8), each with containers/image's
	// /v2/ ping; platform manifests come from the workspace's record.
	if sigRerun-plainRerun > 2*8 {
		t.Errorf("signature lookups cost %d requests on a rerun of 6 images", sigRerun-plainRerun)
	}
}

// TestSignaturesPrune: pruning an image prunes its signature; the
// signatures of kept images stay, even when a run does not look for them.
func TestSignaturesPrune(t *testing.T) {
	t.Parallel()
	w := newSignedWorld(t, registrytest.Options{})
	ws := filepath.Join(w.dir, "ws")
	root := "docker://" + w.dst.Host() + "/m2m"
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "--workspace", "file://"+ws, root); code != 0 {
		t.Fatalf("first run exit %d", code)
	}
	all := w.images
	dropped := all[0]
	w.images = all[1:]
	// A run without signature lookups keeps every signature of kept images.
	code, out, _ := w.gapmirror("mirror", "-c", w.isc(""), "--remove-signatures", "--prune", "--workspace", "file://"+ws, root)
	if code != 0 {
		t.Fatalf("prune run exit %d:\n%s", code, out)
	}
	sigTag := "sha256-" + dropped.Digest.Encoded() + ".sig"
	if _, err := w.dst.ManifestDigest("m2m/"+dropped.Repo, sigTag); err == nil {
		t.Errorf("signature of the pruned image %s is still at the mirror", dropped.Ref)
	}
	if _, err := w.dst.ManifestDigest("m2m/"+dropped.Repo, dropped.Tag); err == nil {
		t.Errorf("pruned image %s is still at the mirror", dropped.Ref)
	}
	delete(w.sigs, dropped.Repo+":"+sigTag)
	w.assertMirrored(w.dst, "m2m")
	w.assertSignatures(w.dst, "m2m", true)
}

// TestSignaturesDelete: delete --delete-signatures removes the signatures of
// the deleted images (platform manifests' included); without the flag the
// plan says they stay.
func TestSignaturesDelete(t *testing.T) {
	t.Parallel()
	w := newSignedWorld(t, registrytest.Options{})
	ws := filepath.Join(w.dir, "ws")
	root := "docker://" + w.dst.Host() + "/m2m"
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "--workspace", "file://"+ws, root); code != 0 {
		t.Fatalf("mirror exit %d", code)
	}
	gone := w.images[3] // multi-arch, signed in one platform manifest
	disc := filepath.Join(w.dir, "disc.yaml")
	must(t, os.WriteFile(disc, []byte("kind: DeleteImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\ndelete:\n  additionalImages:\n  - name: "+gone.Ref+"\n"), 0o644))
	code, out, _ := w.gapmirror("delete", "-c", disc, "--generate", "--workspace", "file://"+ws, root)
	if code != 0 || !strings.Contains(out, "1 sigstore signatures of these images stay") {
		t.Fatalf("delete --generate: exit %d:\n%s", code, out)
	}
	code, out, _ = w.gapmirror("delete", "-c", disc, "--generate", "--delete-signatures", "--workspace", "file://"+ws, root)
	if code != 0 || !strings.Contains(out, "delete plan: 1 images and 1 signatures") {
		t.Fatalf("delete --generate --delete-signatures: exit %d:\n%s", code, out)
	}
	if code, _, _ = w.gapmirror("delete", "--delete-yaml-file", filepath.Join(ws, "working-dir", "delete", "delete-images.yaml"), root); code != 0 {
		t.Fatalf("delete exit %d", code)
	}
	sigTag := "sha256-" + w.childrenOf(gone)[0].Encoded() + ".sig"
	if _, err := w.dst.ManifestDigest("m2m/"+gone.Repo, sigTag); err == nil {
		t.Errorf("signature %s of the deleted image is still at the mirror", sigTag)
	}
	delete(w.sigs, gone.Repo+":"+sigTag)
	w.images = append(w.images[:3:3], w.images[4:]...)
	w.assertMirrored(w.dst, "m2m")
	w.assertSignatures(w.dst, "m2m", true)
}

// TestSignaturesThroughRegistriesConfMirror: images named under a registry
// this machine cannot reach, pulled through a digest-only registries.conf
// mirror: their signatures are looked up and read there too, and the
// absent ones are no warning.
func TestSignaturesThroughRegistriesConfMirror(t *testing.T) {
	t.Parallel()
	w := newSignedWorld(t, registrytest.Options{})
	conf := "[[registry]]\nprefix = \"registry.example.invalid\"\nlocation = \"registry.example.invalid\"\nmirror-by-digest-only = true\n" +
		"[[registry.mirror]]\nlocation = \"" + w.up.Host() + "\"\ninsecure = true\n"
	must(t, os.WriteFile(w.regsConf, []byte(conf), 0o644))
	for i := range w.images {
		// Tags would not go through a digest-only mirror: name every image by digest.
		w.images[i].Ref = "registry.example.invalid/" + w.images[i].Repo + "@" + w.images[i].Digest.String()
		w.images[i].Tag = "sha256-" + w.images[i].Digest.Encoded()
	}
	code, out, errOut := w.gapmirror("mirror", "-c", w.isc(""), "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m")
	if code != 0 || !strings.Contains(out, "signatures: 3 copied") {
		t.Fatalf("exit %d, summary:\n%s", code, out)
	}
	if strings.Contains(errOut, "could not be read") {
		t.Errorf("absent signatures reported as unreadable:\n%s", errOut)
	}
	w.assertMirrored(w.dst, "m")
	w.assertSignatures(w.dst, "m", true)
}

// TestSecurePolicy: with --secure-policy and a policy requiring the test
// key's sigstore signatures, only signed images are mirrored (a multi-arch
// one when its index or every platform manifest is signed); the others
// fail with the policy's answer.
func TestSecurePolicy(t *testing.T) {
	t.Parallel()
	w := newSignedWorld(t, registrytest.Options{})
	der, err := x509.MarshalPKIXPublicKey(&w.key.PublicKey)
	must(t, err)
	keyPath := filepath.Join(w.dir, "cosign.pub")
	must(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644))
	policy := filepath.Join(w.dir, "policy.json")
	must(t, os.WriteFile(policy, []byte(`{"default":[{"type":"reject"}],"transports":{"docker":{"`+w.up.Host()+`":[`+
		`{"type":"sigstoreSigned","keyPath":"`+keyPath+`","signedIdentity":{"type":"matchRepository"}}]}}}`), 0o644))
	// Image 1 signed by a key the policy does not trust.
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	trusted := w.key
	w.key = other
	w.sign(w.images[1].Repo, w.images[1].Digest)
	w.key = trusted
	ws := filepath.Join(w.dir, "ws")
	root := "docker://" + w.dst.Host() + "/m"
	code, out, _ := w.gapmirror("mirror", "-c", w.isc(""), "--secure-policy", "--policy", policy, "--workspace", "file://"+ws, root)
	if code != 8 || !strings.Contains(out, "2 copied") || !strings.Contains(out, "app-01:v1 (mirror.additionalImages[1])") || !strings.Contains(out, "(signature): ") || !strings.Contains(out, "refused by the signature policy") {
		t.Fatalf("exit %d (want 8, additional images failed), summary:\n%s", code, out)
	}
	for i, ex := range w.images {
		_, err := w.dst.ManifestDigest("m/"+ex.Repo, ex.Tag)
		if signed := i == 0 || i == 5; signed != (err == nil) {
			t.Errorf("image %d (%s): signed %v, at the mirror: %v", i, ex.Ref, signed, err)
		}
	}
	// Signing image 3's other platform manifest lets it through.
	w.sign(w.images[3].Repo, w.childrenOf(w.images[3])[1])
	code, out, _ = w.gapmirror("mirror", "-c", w.isc(""), "--secure-policy", "--policy", policy, "--workspace", "file://"+ws, root)
	if code != 8 || !strings.Contains(out, "1 copied, 2 already at the destination") {
		t.Fatalf("after signing every platform: exit %d, summary:\n%s", code, out)
	}
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "--policy", policy, "--workspace", "file://"+ws, root); code != 1 {
		t.Errorf("--policy without --secure-policy: exit %d, want 1", code)
	}
}

// TestSignaturesTokenAuth: signature lookups and copies work against
// registries using the bearer token flow, with a pull-only upstream account.
func TestSignaturesTokenAuth(t *testing.T) {
	t.Parallel()
	w := signWorld(t, newTokenWorld(t))
	w.setAuth(login{w.up.Host(), "puller", upPull, ""}, login{w.dst.Host(), "admin", dstAdmin, ""})
	code, out, errOut := w.gapmirror("mirror", "-c", w.isc(""), "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m2m")
	if code != 0 || !strings.Contains(out, "signatures: 3 copied") || strings.Contains(errOut, "could not be read") {
		t.Fatalf("exit %d, summary:\n%s\nstderr:\n%s", code, out, errOut)
	}
	w.assertMirrored(w.dst, "m2m")
	w.assertSignatures(w.dst, "m2m", true)
}

// sigRequests counts the requests for signature tags (…/manifests/sha256-<hex>.sig)
// a registry receives, by repository path.
type sigRequests struct {
	mu     sync.Mutex
	byRepo map[string]int
}

func (s *sigRequests) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if repo, tag, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v2/"), "/manifests/"); ok && strings.HasSuffix(tag, ".sig") {
			s.mu.Lock()
			s.byRepo[repo]++
			s.mu.Unlock()
		}
		next.ServeHTTP(rw, r)
	})
}

// take returns the counts so far and starts again.
func (s *sigRequests) take() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	got := s.byRepo
	s.byRepo = map[string]int{}
	return got
}

// TestSignaturesRegistriesD: the sigstore signature lookup honours
// registries.d as containers/image does: a registry, or a repository,
// configured with use-sigstore-attachments: false gets no .sig request and
// none of its signatures is mirrored, the most specific entry deciding;
// where registries.d says nothing (or names only a lookaside), signatures
// are looked for and mirrored, as by default.
func TestSignaturesRegistriesD(t *testing.T) {
	t.Parallel()
	w := newSignedWorld(t, registrytest.Options{})
	counter := &sigRequests{byRepo: map[string]int{}}
	w.up.SetWrap(counter.Wrap)
	isc := w.isc("")
	host, repo0 := w.up.Host(), w.images[0].Repo
	run := func(name, conf string) (string, map[string]int) {
		t.Helper()
		dir := filepath.Join(w.dir, "registries.d-"+name)
		must(t, os.MkdirAll(dir, 0o755))
		if conf != "" {
			must(t, os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(conf), 0o644))
		}
		code, _, errOut := w.gapmirror("mirror", "-c", isc, "--registries.d", dir, "--workspace", "file://"+filepath.Join(w.dir, "ws-"+name), "docker://"+w.dst.Host()+"/"+name)
		if code != 0 {
			t.Fatalf("%s: exit %d", name, code)
		}
		w.assertMirrored(w.dst, name)
		return errOut, counter.take()
	}

	// Nothing configured: every image's signature tag is asked for.
	if _, got := run("default", ""); got[repo0] == 0 || got[w.images[5].Repo] == 0 {
		t.Fatalf("with an empty registries.d the signatures were not looked up: %v", got)
	}
	w.assertSignatures(w.dst, "default", true)

	// The upstream registry turned off: not one .sig request reaches it.
	if _, got := run("off", "docker:\n  "+host+":\n    use-sigstore-attachments: false\n"); len(got) > 0 {
		t.Errorf("use-sigstore-attachments: false for %s, yet it received .sig requests: %v", host, got)
	}
	w.assertSignatures(w.dst, "off", false)
	// default-docker off, as containers/image's own default.
	if _, got := run("default-off", "default-docker:\n  use-sigstore-attachments: false\n"); len(got) > 0 {
		t.Errorf("default-docker use-sigstore-attachments: false, yet .sig requests: %v", got)
	}
	w.assertSignatures(w.dst, "default-off", false)

	// One repository off, the registry on: the most specific entry decides.
	_, got := run("repo-off", "docker:\n  "+host+":\n    use-sigstore-attachments: true\n  "+host+"/"+repo0+":\n    use-sigstore-attachments: false\n")
	if got[repo0] != 0 || got[w.images[5].Repo] == 0 {
		t.Errorf("%s/%s off and %s on: .sig requests %v", host, repo0, host, got)
	}
	if _, err := w.dst.ManifestDigest("repo-off/"+repo0, "sha256-"+w.images[0].Digest.Encoded()+".sig"); err == nil {
		t.Errorf("the signature of %s was mirrored though registries.d turns its attachments off", w.images[0].Ref)
	}
	if _, err := w.dst.ManifestDigest("repo-off/"+w.images[5].Repo, "sha256-"+w.images[5].Digest.Encoded()+".sig"); err != nil {
		t.Errorf("the signature of %s was not mirrored: %v", w.images[5].Ref, err)
	}

	// A lookaside alone (as containers-common's default.yaml has) leaves the
	// lookup on, and the run says those signatures are not mirrored.
	errOut, got := run("lookaside", "default-docker:\n  lookaside: https://sigs.example.invalid/sigstore\n")
	if got[repo0] == 0 {
		t.Errorf("a default-docker with only a lookaside turned the lookup off: %v", got)
	}
	w.assertSignatures(w.dst, "lookaside", true)
	if !strings.Contains(errOut, "https://sigs.example.invalid/sigstore") || !strings.Contains(errOut, "does not mirror those signatures") {
		t.Errorf("the lookaside was not mentioned:\n%s", errOut)
	}

	// Two files configuring one namespace: refused as containers/image does.
	dup := filepath.Join(w.dir, "registries.d-dup")
	must(t, os.MkdirAll(dup, 0o755))
	for _, f := range []string{"a.yaml", "b.yaml"} {
		must(t, os.WriteFile(filepath.Join(dup, f), []byte("docker:\n  "+host+":\n    use-sigstore-attachments: false\n"), 0o644))
	}
	code, _, errOut := w.gapmirror("mirror", "-c", isc, "--registries.d", dup, "--workspace", "file://"+filepath.Join(w.dir, "ws-dup"), "docker://"+w.dst.Host()+"/dup")
	if code != 1 || !strings.Contains(errOut, "--registries.d "+dup) || !strings.Contains(errOut, "configured in both") {
		t.Errorf("a namespace configured twice: exit %d: %s", code, errOut)
	}
}
