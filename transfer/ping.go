package transfer

import (
	"strings"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
)

// explain is failure.Explain for an operation on img; when the operation failed
// because the registry's ping failed (a 5xx, a reset), it also forgets
// img's source and destination: containers/image remembers a failed ping
// for the life of the client, so a retry with the same one fails again
// however soon the registry is back.
func (r *Registry) explain(err error, img imageset.Image) error {
	if strings.Contains(err.Error(), "pinging container registry") {
		key := r.Name(img)
		r.mu.Lock()
		// Not closed: other blobs of the image may be using them; a client
		// whose ping failed holds no connection worth closing.
		delete(r.srcs, key)
		delete(r.dests, key)
		r.mu.Unlock()
	}
	return failure.Explain(err, r.Name(img))
}
