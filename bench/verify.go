package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
)

// verifyReport is the part of `gapmirror verify -o json` the bench reads.
type verifyReport struct {
	Checked struct {
		Images            int `json:"images"`
		Signatures        int `json:"signatures"`
		PlatformManifests int `json:"platformManifests"`
		Blobs             int `json:"blobs"`
		Catalogs          int `json:"catalogs"`
		CatalogImages     int `json:"catalogImages"`
		Requests          int `json:"requests"`
	} `json:"checked"`
	Problems []struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	} `json:"problems"`
}

// verifyMirror runs gapmirror verify on the mirror disk-to-mirror of
// scenario E filled (registry e-d2m, root /mirror), and prints its
// requests (counted by the bench's proxy) against the budget of issue
// 24, 1.1 per image plus one per blob, and its time against the push's.
func (b *bench) verifyMirror(ctx context.Context, dir string, push tripResult) error {
	reg, err := b.registry(ctx, "e-d2m")
	if err != nil {
		return err
	}
	args := []string{"verify", "-o", "json", "--from", "file://" + filepath.Join(dir, "archive"),
		"--registries-conf", b.regsConf, "--authfile", b.authFile, "--dest-tls-verify=false", "docker://" + reg.Host() + "/mirror"}
	before := b.requests.Load()
	var out bytes.Buffer
	took, err := b.command(ctx, "E verify", &out, b.bin, args, nil)
	asked := b.requests.Load() - before
	if err != nil {
		return fmt.Errorf("E verify of a mirror disk-to-mirror just filled failed: %w\n%s", err, tail(out.String(), 30))
	}
	var rep verifyReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return fmt.Errorf("E verify printed no JSON report: %v", err)
	}
	if len(rep.Problems) > 0 {
		return fmt.Errorf("E verify found problems on a mirror disk-to-mirror just filled: %s", tail(out.String(), 30))
	}
	c := rep.Checked
	images := c.Images + c.Signatures
	budget := 1.1*float64(images) + float64(c.Blobs)
	within := "within"
	if float64(asked) > budget {
		within = "OVER"
	}
	fmt.Printf("  %-52s %7.2fs  %.2f × disk-to-mirror's %.2fs\n", "gapmirror verify (disk-to-mirror's mirror)", took.Seconds(), took.Seconds()/max(push.row.took.Seconds(), 1e-6), push.row.took.Seconds())
	fmt.Printf("      %d requests (%d by its own count) for %d images and signatures, %d platform manifests, %d blobs, %d rebuilt catalogs naming %d images\n",
		asked, c.Requests, images, c.PlatformManifests, c.Blobs, c.Catalogs, c.CatalogImages)
	fmt.Printf("      %.3f requests per image beyond one per blob; budget 1.1 per image + 1 per blob = %.0f: %s; %.3f per manifest (image or platform manifest) beyond one per blob\n",
		(float64(asked)-float64(c.Blobs))/float64(images), budget, within, (float64(asked)-float64(c.Blobs))/float64(images+c.PlatformManifests))
	return nil
}
