package serve

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/distribution/distribution/v3/registry/auth"
	// The htpasswd access controller, which the served registry delegates to.
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
)

// accessControllerName is how the registry's configuration names the
// controller below; its options carry Go values, so only this process can
// configure it.
const accessControllerName = "gapmirror-serve"

// pushUser is the user name of the serving process's own push (--from).
const pushUser = "gapmirror-serve"

func init() {
	if err := auth.Register(accessControllerName, newAccessController); err != nil {
		panic(err)
	}
}

// accessController lets the serving process's own push through with a
// password made for this run only, then asks distribution's htpasswd
// controller when there is an htpasswd file, or else grants anonymous
// reads and nothing more.
type accessController struct {
	pushPassword string
	htpasswd     auth.AccessController // nil: anonymous read-only
	path         string                // of the htpasswd file
	realm        string

	// verified remembers credentials the htpasswd file accepted, as a
	// sha256 of user and password, with the file's modification time then:
	// distribution checks bcrypt on every request (tens of milliseconds of
	// CPU each), which would bound a push by bcrypt. A changed file
	// forgets them all.
	mu       sync.Mutex
	verified map[[32]byte]time.Time
}

func newAccessController(options map[string]any) (auth.AccessController, error) {
	ac := &accessController{realm: "gapmirror"}
	ac.pushPassword, _ = options["pushpassword"].(string)
	if len(ac.pushPassword) < 32 {
		return nil, errors.New("gapmirror-serve access controller: no push password")
	}
	if path, _ := options["htpasswd"].(string); path != "" {
		h, err := auth.GetAccessController("htpasswd", map[string]any{"realm": ac.realm, "path": path})
		if err != nil {
			return nil, err
		}
		ac.htpasswd, ac.path, ac.verified = h, path, map[[32]byte]time.Time{}
	}
	return ac, nil
}

func (ac *accessController) Authorized(r *http.Request, access ...auth.Access) (*auth.Grant, error) {
	user, password, ok := r.BasicAuth()
	if ok && user == pushUser && subtle.ConstantTimeCompare([]byte(password), []byte(ac.pushPassword)) == 1 {
		return &auth.Grant{User: auth.UserInfo{Name: pushUser}}, nil
	}
	if ac.htpasswd != nil {
		return ac.authorizedByFile(r, user, password, ok, access)
	}
	if ok && user != "" {
		return nil, challenge{realm: ac.realm, err: fmt.Errorf("user %q: this registry has no users (serve with --htpasswd to have some)", user)}
	}
	// Anonymous: reads only. The /v2/ check (no access asked) is challenged
	// when it comes without credentials, so that clients that push learn to
	// send theirs; pulling clients carry on without (as with Harbor's
	// public projects).
	if len(access) == 0 && r.Header.Get("Authorization") == "" {
		return nil, challenge{realm: ac.realm, err: auth.ErrInvalidCredential}
	}
	for _, a := range access {
		read := a.Action == "pull" || a.Type == "registry" && a.Name == "catalog" && r.Method == http.MethodGet
		if !read {
			return nil, challenge{realm: ac.realm, err: fmt.Errorf("%s %s:%s needs credentials: this registry is read-only for anonymous users (serve with --htpasswd to allow users to push and delete)", a.Action, a.Type, a.Name)}
		}
	}
	return &auth.Grant{}, nil
}

// authorizedByFile asks distribution's htpasswd controller, or the memory of
// what it accepted while the file has not changed.
func (ac *accessController) authorizedByFile(r *http.Request, user, password string, ok bool, access []auth.Access) (*auth.Grant, error) {
	fi, err := os.Stat(ac.path)
	if !ok || err != nil {
		return ac.htpasswd.Authorized(r, access...)
	}
	key := sha256.Sum256([]byte(user + "\x00" + password))
	ac.mu.Lock()
	when, known := ac.verified[key]
	ac.mu.Unlock()
	if known && when.Equal(fi.ModTime()) {
		return &auth.Grant{User: auth.UserInfo{Name: user}}, nil
	}
	grant, err := ac.htpasswd.Authorized(r, access...)
	if err == nil {
		ac.mu.Lock()
		if len(ac.verified) > 1000 {
			clear(ac.verified)
		}
		ac.verified[key] = fi.ModTime()
		ac.mu.Unlock()
	}
	return grant, err
}

// challenge asks for basic auth.
type challenge struct {
	realm string
	err   error
}

func (c challenge) SetHeaders(_ *http.Request, w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", fmt.Sprintf("Basic realm=%q", c.realm))
}

func (c challenge) Error() string { return c.err.Error() }
