package chartrepo

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"
)

var hexDigest = regexp.MustCompile(`^[a-f0-9]{64}$`)

// resolveIndex resolves src in an HTTP chart repository: its index.yaml, read with Helm's own
// index type and version choice (a range picks the newest match; empty, the newest stable).
func (c *client) resolveIndex(ctx context.Context, src Source) (resolution, error) {
	base, err := url.Parse(strings.TrimRight(src.URL, "/") + "/")
	if err != nil {
		return resolution{}, fmt.Errorf("repository URL: %w", err)
	}
	indexURL := base.JoinPath("index.yaml")
	body, _, err := c.get(ctx, indexURL.String(), "", c.f.opts.MaxIndexBytes)
	if err != nil {
		return resolution{}, err
	}
	var index repo.IndexFile
	if err := yaml.Unmarshal(body, &index); err != nil || index.APIVersion == "" {
		return resolution{}, fmt.Errorf("%s is not a chart repository's index (YAML with apiVersion and entries)", where(indexURL))
	}
	index.SortEntries()
	cv, err := index.Get(src.Chart, src.Version)
	if err != nil {
		if errors.Is(err, repo.ErrNoChartName) {
			return resolution{}, fmt.Errorf("%w: %s has no chart %q", ErrNotFound, where(indexURL), src.Chart)
		}
		return resolution{}, fmt.Errorf("%w: %s has no version of %s matching %q", ErrNotFound, where(indexURL), src.Chart, src.Version)
	}
	if len(cv.URLs) == 0 {
		return resolution{}, fmt.Errorf("%s lists %s %s without a URL", where(indexURL), src.Chart, cv.Version)
	}
	// A chart's URL is relative to the repository, or absolute; either way it must be on the
	// repository's own host, which the transport checks again on every request.
	loc, err := base.Parse(cv.URLs[0])
	if err != nil {
		return resolution{}, fmt.Errorf("%s lists %s %s at a URL that does not parse", where(indexURL), src.Chart, cv.Version)
	}
	if o, err := originOf(loc.String()); err != nil || o.Host != c.origin.Host || o.Scheme != c.origin.Scheme {
		return resolution{}, fmt.Errorf("%w: %s places %s %s at %s, not on the repository's %s", ErrOtherHost, where(indexURL), src.Chart, cv.Version, where(loc), c.origin)
	}
	r := resolution{version: cv.Version, location: loc.String()}
	if d := strings.TrimPrefix(cv.Digest, "sha256:"); hexDigest.MatchString(d) {
		r.digest = "sha256:" + d
	}
	return r, nil
}
