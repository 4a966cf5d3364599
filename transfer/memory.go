package transfer

import (
	"log/slog"
	"sync"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/imageset"
)

// runMemory is what a Registry has seen in this run (and what the
// workspace's records told it of earlier runs): manifests already read,
// where blobs are, which repositories and tags exist. Every answer it
// gives saves a request; none is trusted where being wrong would lose an
// image (see HasBlob and resendTrusted).
type runMemory struct {
	mu sync.Mutex
	// resolved keeps the manifests ResolveDigest and the signature lookup
	// read, by repository and digest, so that neither they nor the copy's
	// planning pass read one twice. (A manifest read from one repository
	// says nothing of another: an image naming a digest its repository does
	// not hold must fail, not be served another repository's read.)
	resolved map[manifestKey][]byte
	// servedFrom is, for an upstream repository that registries.conf
	// gives several pull sources, the one that served it last (a tag
	// resolved, a manifest read: see fromSources): its blobs are asked
	// there first.
	servedFrom map[string]int

	// Blob bookkeeping of the direct push path (see HasBlob), by
	// repository path at the mirror host.
	known    map[digest.Digest]string // a repository holding the blob (earlier runs, this run)
	have     map[string]bool          // repo@digest this run put or found there
	sessions map[string]string        // repo@digest → upload opened by a mount the registry could not do
	// trusted are the blobs (repo@digest) HasBlob took to be there on the
	// workspace's records alone, without asking; resend is where the run
	// reads blobs, to send one of them after all when a manifest PUT says
	// the registry lost it (see ResendFrom, PutManifest). Without resend,
	// HasBlob asks.
	trusted map[string]bool
	resend  Source
	log     *slog.Logger

	// The tags of repositories this run pushes several images into and no
	// earlier run of the workspace pushed to: one listing answers all their
	// existence checks where a HEAD each would (see HasManifest).
	expect     map[string]int         // repository path → images of the run going there
	tags       map[string]*listedTags // by repository path
	knownRepos map[string]bool        // repositories earlier runs put blobs in
	// catalog lists, on a first push, the repositories already under the
	// root: one request tells which repositories are new, whose images
	// then need no existence check at all (see lacksTag).
	catalog struct {
		once  sync.Once
		repos map[string]bool
		ok    bool
	}
}

type listedTags struct {
	once sync.Once
	tags map[string]bool
	err  error
}

// unlisted reports whether the catalog read at the start of a first push
// did not list repo: the repository did not exist then.
func (m *runMemory) unlisted(repo string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.catalog.ok && !m.catalog.repos[repo]
}

// put notes that repo holds blob d.
func (m *runMemory) put(repo string, d digest.Digest) {
	m.mu.Lock()
	m.have[repo+"@"+d.String()] = true
	delete(m.trusted, repo+"@"+d.String())
	if _, ok := m.known[d]; !ok {
		m.known[d] = repo
	}
	m.mu.Unlock()
}

// manifestKey is a manifest of one upstream repository.
type manifestKey struct {
	repo string
	d    digest.Digest
}

// repoOf is the repository of image reference name (its normalized name
// without tag or digest), name itself when it does not parse.
func repoOf(name string) string {
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return name
	}
	return named.Name()
}

// KeptManifest is manifest d of img's repository as the resolution kept
// it (see resolved); take also forgets it, for a reader that keeps it from
// then on.
func (r *Registry) KeptManifest(img imageset.Image, d digest.Digest, take bool) ([]byte, bool) {
	k := manifestKey{repoOf(r.Name(img)), d}
	r.runMemory.mu.Lock()
	defer r.runMemory.mu.Unlock()
	data, ok := r.resolved[k]
	if take {
		delete(r.resolved, k)
	}
	return data, ok
}

// KeepResolved keeps data for later reads of manifest d of the repository
// of name in this run (see resolved) when it is d.
func (r *Registry) KeepResolved(name string, d digest.Digest, data []byte) {
	if d.Validate() != nil || d.Algorithm().FromBytes(data) != d {
		return
	}
	r.runMemory.mu.Lock()
	r.resolved[manifestKey{repoOf(name), d}] = data
	r.runMemory.mu.Unlock()
}

// servedBy is the pull source (of n) that served the repository of image
// name last; 0 when none did.
func (m *runMemory) servedBy(name string, n int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i, ok := m.servedFrom[repoOf(name)]; ok && i < n {
		return i
	}
	return 0
}

// served notes that pull source i served the repository of image name.
func (m *runMemory) served(name string, i int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.servedFrom == nil {
		m.servedFrom = map[string]int{}
	}
	m.servedFrom[repoOf(name)] = i
}
