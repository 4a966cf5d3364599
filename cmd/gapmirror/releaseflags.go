package main

import (
	"github.com/spf13/pflag"

	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/sections"
)

// addReleaseFlags registers the flags of mirror.platform (release payloads).
func addReleaseFlags(fl *pflag.FlagSet, o *sections.ReleaseOptions) {
	fl.StringVar(&o.GraphURL, "graph-url", "", "update graph endpoint for every channel; default $"+release.EnvUpdateURLOverride+", then "+release.DefaultOCPGraphURL+" (OKD: "+release.DefaultOKDGraphURL+")")
	fl.StringVar(&o.SignatureURL, "release-signature-url", "", "release signature store (<url>/sha256=<hex>/signature-N); default $"+release.EnvSignatureURL+", then "+release.DefaultSignatureURL)
	fl.StringSliceVar(&o.SignatureKeys, "release-signature-key", nil, "trusted release signing key: an OpenPGP public key file, or a directory of them (repeatable); default $"+release.EnvSignatureKey+", then "+release.DefaultSignatureKeyPath)
	fl.BoolVar(&o.SkipSignatureVerification, "skip-release-signature-verification", false, "DANGEROUS: mirror release payloads without checking that a trusted key signed them")
	fl.BoolVar(&o.IncludeConditional, "include-conditional", false, "let upgrade paths (shortestPath, several channels) take conditional updates; the plan names their known risks")
	fl.StringVar(&o.GraphDataURL, "graph-data-url", "", "graph: true: where the update graph data tarball comes from; default "+release.DefaultGraphDataURL)
	fl.StringVar(&o.GraphBaseImage, "graph-base-image", "", "graph: true: the image the graph data is layered on (needs bash and cp); default "+release.DefaultGraphBaseImage)
}
