//go:build tools

// Package tools pins opm, the reference FBC implementation the catalog tests
// use as an oracle (opm validate, opm serve) and the benchmark compares with
// (opm render). It is a module of its own so that operator-registry and its
// dependencies stay out of gapmirror's go.mod; `make opm` builds bin/opm from
// it. To move to another opm release: cd tools/opm && go get
// github.com/operator-framework/operator-registry@VERSION && go mod tidy,
// then change OPM_VERSION in the Makefile.
package tools

import _ "github.com/operator-framework/operator-registry/cmd/opm"
