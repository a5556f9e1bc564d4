package chartrepo

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Media types of a Helm chart in an OCI registry (what helm push writes).
const (
	ociManifestType   = "application/vnd.oci.image.manifest.v1+json"
	helmChartLayer    = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	helmChartLayerOld = "application/tar+gzip"
)

// resolveOCI resolves src in an OCI registry, speaking the distribution API to the registry's
// host only: the tags when src.Version is a range or empty, the manifest of the chosen tag, and
// its chart layer's digest and size.
func (c *client) resolveOCI(ctx context.Context, src Source) (resolution, error) {
	u, _ := url.Parse(src.URL)
	repository := strings.Trim(u.Path, "/")
	if repository == "" {
		return resolution{}, fmt.Errorf("repository URL %s names no chart: oci://host/path/chart", src.URL)
	}
	api := &url.URL{Scheme: c.origin.Scheme, Host: u.Host, Path: "/v2/" + repository + "/"}
	version := src.Version
	if _, err := semver.StrictNewVersion(strings.TrimPrefix(version, "v")); err != nil || version == "" {
		v, err := c.newestTag(ctx, api, src)
		if err != nil {
			return resolution{}, err
		}
		version = v
	}
	// Helm stores a version's "+" as "_" in its tag: tags cannot hold "+".
	tag := strings.ReplaceAll(version, "+", "_")
	body, err := c.ociGet(ctx, api.JoinPath("manifests", tag).String(), ociManifestType, c.f.opts.MaxIndexBytes)
	if err != nil {
		var se *statusError
		if errors.As(err, &se) && se.code == http.StatusNotFound {
			return resolution{}, fmt.Errorf("%w: %s has no version %s", ErrNotFound, src.URL, version)
		}
		return resolution{}, err
	}
	var m struct {
		Layers []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
			Size      int64  `json:"size"`
		} `json:"layers"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return resolution{}, fmt.Errorf("%s version %s: the manifest is not an OCI manifest", src.URL, version)
	}
	for _, l := range m.Layers {
		if l.MediaType != helmChartLayer && l.MediaType != helmChartLayerOld {
			continue
		}
		d := strings.TrimPrefix(l.Digest, "sha256:")
		if !strings.HasPrefix(l.Digest, "sha256:") || !hexDigest.MatchString(d) {
			return resolution{}, fmt.Errorf("%s version %s: the chart layer's digest is not sha256", src.URL, version)
		}
		if l.Size > maxArchive {
			return resolution{}, fmt.Errorf("%w: %s version %s is %d bytes, more than %d", ErrTooLarge, src.URL, version, l.Size, maxArchive)
		}
		return resolution{version: version, digest: l.Digest, location: api.JoinPath("blobs", l.Digest).String()}, nil
	}
	return resolution{}, fmt.Errorf("%s version %s is not a Helm chart: its manifest has no %s layer", src.URL, version, helmChartLayer)
}

// newestTag is the newest tag that is a version src.Version allows (a range; empty: the newest
// stable version).
func (c *client) newestTag(ctx context.Context, api *url.URL, src Source) (string, error) {
	constraint, err := semver.NewConstraint(cmp.Or(src.Version, "*"))
	if err != nil {
		return "", fmt.Errorf("version %q is neither a version nor a range: %v", src.Version, err)
	}
	body, err := c.ociGet(ctx, api.JoinPath("tags", "list").String(), "application/json", c.f.opts.MaxIndexBytes)
	if err != nil {
		return "", err
	}
	var tags struct {
		Tags []string `json:"tags"`
	}
	if err := json.Unmarshal(body, &tags); err != nil {
		return "", fmt.Errorf("%s: the tag list is not JSON", src.URL)
	}
	var versions []*semver.Version
	for _, t := range tags.Tags {
		if v, err := semver.NewVersion(strings.ReplaceAll(t, "_", "+")); err == nil && constraint.Check(v) {
			versions = append(versions, v)
		}
	}
	if len(versions) == 0 {
		return "", fmt.Errorf("%w: %s has no version matching %q", ErrNotFound, src.URL, cmp.Or(src.Version, "*"))
	}
	return slices.MaxFunc(versions, func(a, b *semver.Version) int { return a.Compare(b) }).Original(), nil
}

// ociGet is get, answering a registry's challenge once: Basic takes the credentials as they
// are; Bearer asks the registry's token service for a token with them, which must be on the
// registry's own host (the transport refuses any other).
func (c *client) ociGet(ctx context.Context, u, accept string, limit int64) ([]byte, error) {
	body, resp, err := c.get(ctx, u, accept, limit)
	var se *statusError
	if err == nil || !errors.As(err, &se) || se.code != http.StatusUnauthorized || c.bearer != "" {
		return body, err
	}
	challenge := resp.Header.Get("WWW-Authenticate")
	scheme, params := parseChallenge(challenge)
	switch scheme {
	case "basic":
		if c.creds == nil {
			return nil, err
		}
		body, _, err = c.get(ctx, u, accept, limit) // get sends the credentials as Basic
		return body, err
	case "bearer":
		realm, perr := url.Parse(params["realm"])
		if perr != nil || realm.Host == "" {
			return nil, fmt.Errorf("%s: the registry's token service (realm) is not a URL", where(resp.Request.URL))
		}
		q := realm.Query()
		if s := params["service"]; s != "" {
			q.Set("service", s)
		}
		if s := params["scope"]; s != "" {
			q.Set("scope", s)
		}
		realm.RawQuery = q.Encode()
		tok, _, terr := c.get(ctx, realm.String(), "application/json", 1<<20)
		if terr != nil {
			return nil, fmt.Errorf("asking the registry's token service: %w", terr)
		}
		var t struct {
			Token       string `json:"token"`
			AccessToken string `json:"access_token"`
		}
		if json.Unmarshal(tok, &t) != nil || cmp.Or(t.Token, t.AccessToken) == "" {
			return nil, fmt.Errorf("the registry's token service at %s answered no token", where(realm))
		}
		c.bearer = cmp.Or(t.Token, t.AccessToken)
		body, _, err = c.get(ctx, u, accept, limit)
		return body, err
	}
	return nil, err
}

// parseChallenge parses a WWW-Authenticate header: its scheme (lower case) and parameters.
func parseChallenge(h string) (string, map[string]string) {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	params := map[string]string{}
	for rest != "" {
		rest = strings.TrimLeft(rest, " ,")
		k, v, ok := strings.Cut(rest, "=")
		if !ok {
			break
		}
		if strings.HasPrefix(v, `"`) {
			end := strings.Index(v[1:], `"`)
			if end < 0 {
				break
			}
			params[strings.ToLower(strings.TrimSpace(k))] = v[1 : end+1]
			rest = v[end+2:]
		} else {
			val, after, _ := strings.Cut(v, ",")
			params[strings.ToLower(strings.TrimSpace(k))] = val
			rest = after
		}
	}
	return strings.ToLower(scheme), params
}
