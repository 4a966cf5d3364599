package serve

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"

	"github.com/distribution/distribution/v3/registry/auth"
	// The htpasswd access controller, which the served registry delegates to.
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
)

// accessControllerName is how the registry's configuration names the
// controller below; its options carry Go values, so only this process can
// configure it.
const accessControllerName = "gapmirror-serve"

// PushUser is the user name of the serving process's own push (--from).
const PushUser = "gapmirror-serve"

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
	realm        string
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
		ac.htpasswd = h
	}
	return ac, nil
}

func (ac *accessController) Authorized(r *http.Request, access ...auth.Access) (*auth.Grant, error) {
	user, password, ok := r.BasicAuth()
	if ok && user == PushUser && subtle.ConstantTimeCompare([]byte(password), []byte(ac.pushPassword)) == 1 {
		return &auth.Grant{User: auth.UserInfo{Name: PushUser}}, nil
	}
	if ac.htpasswd != nil {
		return ac.htpasswd.Authorized(r, access...)
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

// challenge asks for basic auth.
type challenge struct {
	realm string
	err   error
}

func (c challenge) SetHeaders(_ *http.Request, w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", fmt.Sprintf("Basic realm=%q", c.realm))
}

func (c challenge) Error() string { return c.err.Error() }
