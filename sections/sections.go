package sections

import (
	"log/slog"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/ocistore"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// Contributors resolve the configuration sections that need more than a
// tag lookup: operator catalogs, release payloads and helm charts, into
// plan; ws is read for what earlier runs kept, never written.
func Contributors(t *Env, up *transfer.Registry, store *ocistore.Store, plan *workspace.Plan, ws string) []imageset.Contributor {
	return []imageset.Contributor{
		&operators{trip: t, up: up, store: store, plan: plan},
		&releaseContributor{t: t, up: up, store: store, out: plan, ws: ws},
		&helmCharts{t: t, plan: plan, ws: ws, store: store},
		&layoutImages{t: t, store: store},
	}
}

// Env is what the contributors use of a trip's options.
type Env struct {
	Config     *imageset.ImageSetConfiguration
	ConfigPath string
	// Upstream configures the helm chart repositories' HTTP clients and
	// the OCI chart registries as it does the image registries.
	Upstream transfer.RegistryOptions
	Copy     transfer.Options
	Releases ReleaseOptions
	// ToolVersion goes into the User-Agent of update-graph and signature
	// requests.
	ToolVersion string
	Log         *slog.Logger
}
