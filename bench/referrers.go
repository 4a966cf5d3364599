package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/internal/cosigntest"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
)

// Scenario R (-referrers N): what OCI 1.1 referrers cost (issue 23). N
// small images upstream (scenario B's), every other one signed as cosign v3
// signs by default (a Sigstore bundle attached as a referrer), with an
// in-toto attestation and an SPDX SBOM, real keys and signatures
// (internal/cosigntest). Both registries are distribution, which has no
// referrers API: discovery and the mirror's index go through the referrers
// tag schema, as on most air-gapped registries. mirror-to-disk runs with
// --referrers none, the default (signatures,attestations) and all, each
// into its own cache and archive; then a mirror-to-mirror and its no-change
// rerun. Requests are counted per image on each side.
func (b *bench) referrersScenario(ctx context.Context, n int) error {
	dir := filepath.Join(b.dir, "scenario-r")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fmt.Printf("\nScenario R, OCI referrers: %d images of 20–100 KiB, every other one with a cosign v3 signature bundle, an in-toto attestation and an SPDX SBOM as referrers (tag schema: no referrers API)\n", n)
	up, err := b.registry(ctx, "r-upstream")
	if err != nil {
		return err
	}
	images := smallImages(n)
	built, err := buildSmall(images)
	if err != nil {
		return err
	}
	target := imagebuilder.Target{URL: up.URL(), Client: up.Client()}
	if err := pushSmall(ctx, target, images, built); err != nil {
		return err
	}
	key := cosigntest.NewKey("gapmirror bench")
	signed, referrers := 0, 0
	var refs []string
	for i, si := range images {
		refs = append(refs, up.Host()+"/"+si.repo+":"+si.tag)
		if i%2 == 1 {
			continue
		}
		subject := ocispec.Descriptor{MediaType: built[i].MediaType, Digest: built[i].Digest, Size: int64(len(built[i].Manifest))}
		sig, err := cosigntest.Signature(key, subject)
		if err != nil {
			return err
		}
		att, err := cosigntest.Attestation(key, subject, "https://bench.gapmirror.invalid/builder")
		if err != nil {
			return err
		}
		sbom, err := cosigntest.SBOM(subject, si.repo)
		if err != nil {
			return err
		}
		all := []*cosigntest.Referrer{sig, att, sbom}
		if err := cosigntest.PushAll(ctx, target, si.repo, all, true); err != nil {
			return fmt.Errorf("attaching referrers to %s:%s: %w", si.repo, si.tag, err)
		}
		signed, referrers = signed+1, referrers+len(all)
	}
	fmt.Printf("  %d images signed, %d referrers upstream\n", signed, referrers)
	isc := filepath.Join(dir, "isc.yaml")
	if err := writeConfig(isc, refs); err != nil {
		return err
	}

	var rows []tripResult
	for _, kinds := range []string{"none", "signatures,attestations", "all"} {
		name := "m2d-" + map[string]string{"none": "none", "signatures,attestations": "default", "all": "all"}[kinds]
		r, err := b.trip(ctx, "R mirror-to-disk, --referrers "+kinds, n, false, false, "mirror", "-c", isc, "--cache-dir", filepath.Join(dir, name+"-cache"),
			"file://"+filepath.Join(dir, name+"-archive"), "--referrers", kinds)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	mirror, err := b.registry(ctx, "r-mirror")
	if err != nil {
		return err
	}
	m2m := []string{"mirror", "-c", isc, "--cache-dir", filepath.Join(dir, "m2m-cache"), "--workspace", "file://" + filepath.Join(dir, "ws"), "docker://" + mirror.Host() + "/mirror"}
	first, err := b.trip(ctx, "R mirror-to-mirror, default referrers", n, false, false, m2m...)
	if err != nil {
		return err
	}
	again, err := b.trip(ctx, "R mirror-to-mirror, no change", n, true, false, m2m...)
	if err != nil {
		return err
	}
	rows = append(rows, first, again)

	fmt.Println()
	fmt.Printf("  %-62s %8s %16s %16s\n", fmt.Sprintf("R: %d images, %d with 3 referrers", n, signed), "seconds", "req/img upstream", "req/img mirror")
	perImage := func(r tripResult, side string) string {
		v := r.sideRequests(side)
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", float64(v)/float64(n))
	}
	for _, r := range rows {
		fmt.Printf("  %-62s %8.2f %16s %16s\n", r.row.op, r.row.took.Seconds(), perImage(r, "upstream"), perImage(r, "mirror"))
	}
	none, def := rows[0].sideRequests("upstream"), rows[1].sideRequests("upstream")
	fmt.Printf("  discovery: %.2f requests per image upstream beyond --referrers none (%d requests for %d images and their %d referrers)\n",
		float64(def-none)/float64(n), def-none, n, referrers)
	fmt.Println("  req/img = requests the registry of that side served during the run ÷ images; referrers are not counted as images.")
	return nil
}
