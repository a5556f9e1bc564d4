package helmrelease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/release"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/cluster-registry/sdk/chartrender"
)

// Options configure one operation.
type Options struct {
	// Timeout bounds the operation on its member, waiting included; 2 minutes when zero.
	Timeout time.Duration
	// Wait waits, within Timeout, until what the release applied is ready (Helm's kstatus
	// watcher), as helm install --wait does.
	Wait bool
	// Logger hears Helm's own logs; discarded when nil.
	Logger *slog.Logger
	// Revision names what Apply is given (a digest of the chart and values, of the caller's
	// choosing; a label value). Apply records it on the release (RevisionLabel), and does
	// nothing when the release's last revision is deployed with the same Revision, chart name and
	// version, and values: a caller that restarts, and so cannot tell what it applied before,
	// does not make Helm revisions of what is already there. (Helm carries a release's labels to
	// the next revision, so one upgraded by hand keeps the label: the chart and values tell.)
	// Empty: Apply always installs or upgrades.
	Revision string
}

// RevisionLabel is the label of a release's record (Helm's release labels, kept on its storage
// Secret) that holds Options.Revision.
const RevisionLabel = "clusterregistry.k8s.io/revision"

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return 2 * time.Minute
	}
	return o.Timeout
}

func (o Options) wait() kube.WaitStrategy {
	if o.Wait {
		return kube.StatusWatcherStrategy
	}
	return kube.HookOnlyStrategy
}

// Result is where a release stands after an operation: Helm's revision and status.
type Result struct {
	// Installed is true when the operation installed the release, false when it upgraded it.
	Installed bool
	// Unchanged is true when Apply found the release deployed at Options.Revision and did
	// nothing.
	Unchanged bool
	Revision  int
	Status    string
}

// configuration is one operation's action.Configuration: never shared with another operation.
func configuration(rcg genericclioptions.RESTClientGetter, namespace string, opts Options) (*action.Configuration, error) {
	cfg := action.NewConfiguration()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.SetLogger(log.Handler())
	if err := cfg.Init(rcg, namespace, "secret"); err != nil {
		return nil, fmt.Errorf("helm: %w", err)
	}
	if g, ok := rcg.(*getter); ok {
		caps, err := g.m.capabilities()
		if err != nil {
			return nil, err
		}
		cfg.Capabilities = caps
	}
	return cfg, nil
}

// Apply installs the packaged chart archive as release name in namespace, or upgrades the
// release when it exists, with values; server-side apply, as Helm 4 does by default. The chart
// is bounded as chartrender.Load bounds it.
func Apply(ctx context.Context, getter genericclioptions.RESTClientGetter, name, namespace string, archive []byte, values map[string]any, opts Options) (Result, error) {
	if _, err := chartrender.Load(archive); err != nil {
		return Result{}, err
	}
	var labels map[string]string
	if opts.Revision != "" {
		if errs := validation.IsValidLabelValue(opts.Revision); len(errs) > 0 {
			return Result{}, fmt.Errorf("helmrelease: Options.Revision %q is not a label value: %s", opts.Revision, strings.Join(errs, "; "))
		}
		labels = map[string]string{RevisionLabel: opts.Revision}
	}
	ch, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		return Result{}, fmt.Errorf("loading the chart: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	// Discovering the member (the first time) and reading the release's history take no
	// context: they run within the deadline all the same.
	var cfg *action.Configuration
	var last release.Accessor
	var lastRelease release.Releaser
	var herr error
	if err := runWithin(ctx, opts.timeout(), func() error {
		var err error
		if cfg, err = configuration(getter, namespace, opts); err != nil {
			return err
		}
		var history []release.Releaser
		history, herr = action.NewHistory(cfg).Run(name)
		for _, r := range history {
			a, err := release.NewAccessor(r)
			if err != nil {
				return fmt.Errorf("helm answered a release of an unknown kind: %w", err)
			}
			if last == nil || a.Version() > last.Version() {
				last, lastRelease = a, r
			}
		}
		return nil
	}); err != nil {
		return Result{}, fmt.Errorf("release %s/%s: %w", namespace, name, err)
	}
	var rel release.Releaser
	installed := false
	switch {
	case errors.Is(herr, driver.ErrReleaseNotFound):
		install := action.NewInstall(cfg)
		install.ReleaseName, install.Namespace = name, namespace
		install.ServerSideApply = true
		install.Labels = labels
		// The member validates what is applied (Helm's server-side apply asks for strict field
		// validation): validating here too fetches the member's OpenAPI schemas, which its shared
		// discovery then keeps, 1.8 MiB a member (BenchmarkHelmMode; 266 KiB without).
		install.DisableOpenAPIValidation = true
		install.WaitStrategy, install.Timeout = opts.wait(), opts.timeout()
		rel, err = install.RunWithContext(ctx, ch, values)
		installed = true
	case herr != nil:
		return Result{}, fmt.Errorf("reading release %s/%s's history: %w", namespace, name, herr)
	case last != nil && opts.Revision != "" && last.Status() == string(common.StatusDeployed) && last.Labels()[RevisionLabel] == opts.Revision &&
		holds(lastRelease, ch, values):
		return Result{Unchanged: true, Revision: last.Version(), Status: last.Status()}, nil
	default:
		rel, err = runUpgrade(ctx, cfg, name, namespace, labels, ch, values, opts)
	}
	if err != nil {
		verb := "upgrading"
		if installed {
			verb = "installing"
		}
		return Result{Installed: installed}, fmt.Errorf("%s release %s/%s: %w", verb, namespace, name, err)
	}
	return result(rel, installed)
}

// Uninstall uninstalls release name in namespace, as helm uninstall does; a release that is not
// there is no error.
func Uninstall(ctx context.Context, getter genericclioptions.RESTClientGetter, name, namespace string, opts Options) error {
	return runWithin(ctx, opts.timeout(), func() error {
		cfg, err := configuration(getter, namespace, opts)
		if err != nil {
			return err
		}
		un := action.NewUninstall(cfg)
		un.WaitStrategy, un.Timeout = opts.wait(), opts.timeout()
		un.IgnoreNotFound = true
		_, err = un.Run(name)
		if err != nil {
			return fmt.Errorf("uninstalling release %s/%s: %w", namespace, name, err)
		}
		return nil
	})
}

// Rollback rolls release name in namespace back to revision (0: the one before the current), as
// helm rollback does.
func Rollback(ctx context.Context, getter genericclioptions.RESTClientGetter, name, namespace string, revision int, opts Options) error {
	return runWithin(ctx, opts.timeout(), func() error {
		cfg, err := configuration(getter, namespace, opts)
		if err != nil {
			return err
		}
		rb := action.NewRollback(cfg)
		rb.Version = revision
		rb.WaitStrategy, rb.Timeout = opts.wait(), opts.timeout()
		if err := rb.Run(name); err != nil {
			return fmt.Errorf("rolling release %s/%s back: %w", namespace, name, err)
		}
		return nil
	})
}

// Status is release name's current revision and status in namespace; found is false when the
// release is not there.
func Status(ctx context.Context, getter genericclioptions.RESTClientGetter, name, namespace string, opts Options) (r Result, found bool, err error) {
	err = runWithin(ctx, opts.timeout(), func() error {
		cfg, err := configuration(getter, namespace, opts)
		if err != nil {
			return err
		}
		rel, err := action.NewGet(cfg).Run(name)
		if errors.Is(err, driver.ErrReleaseNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading release %s/%s: %w", namespace, name, err)
		}
		r, err = result(rel, false)
		found = err == nil
		return err
	})
	return r, found, err
}

// runWithin runs an action that takes no context: it is left to end in the background when the
// deadline comes first (its requests end with their own timeouts), and the caller is answered at
// the deadline.
func runWithin(ctx context.Context, timeout time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("helm: %w", ctx.Err())
	}
}

func result(rel release.Releaser, installed bool) (Result, error) {
	a, err := release.NewAccessor(rel)
	if err != nil {
		return Result{}, fmt.Errorf("helm answered a release of an unknown kind: %w", err)
	}
	return Result{Installed: installed, Revision: a.Version(), Status: a.Status()}, nil
}

// holds reports whether rel is of chart ch's name and version with values as its values.
func holds(rel release.Releaser, ch *chartv2.Chart, values map[string]any) bool {
	r, ok := rel.(*releasev1.Release)
	if !ok || r.Chart == nil || r.Chart.Metadata == nil || ch.Metadata == nil {
		return false
	}
	if r.Chart.Metadata.Name != ch.Metadata.Name || r.Chart.Metadata.Version != ch.Metadata.Version {
		return false
	}
	// Compared as JSON, as Helm keeps them: numbers read back from its record are float64.
	had, err := json.Marshal(orEmpty(r.Config))
	if err != nil {
		return false
	}
	given, err := json.Marshal(orEmpty(values))
	return err == nil && bytes.Equal(had, given)
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// untilCanceled is a context that ends when ctx is canceled, not when its deadline passes.
func untilCanceled(ctx context.Context) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	return out, func() { stop(); cancel() }
}

// runUpgrade is Helm's upgrade of release namespace/name.
func runUpgrade(ctx context.Context, cfg *action.Configuration, name, namespace string, labels map[string]string, ch *chartv2.Chart, values map[string]any, opts Options) (release.Releaser, error) {
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = namespace
	upgrade.Labels = labels
	upgrade.DisableOpenAPIValidation = true
	// An upgrade that fails (or, waiting, is not ready in time) goes back to the last good
	// revision, as helm upgrade --rollback-on-failure: the member keeps running what it ran.
	upgrade.RollbackOnFailure = true
	// Helm's upgrade answers when its context ends first, but its own work then blocks for
	// good on a channel nobody reads (Helm v4.3.1, action.Upgrade.performUpgrade): each
	// such timeout would leak a goroutine and a release. Its own timeouts end it first:
	// half the time left waits for the new revision, half for the rollback a failure
	// brings, and its context ends only when the caller's is canceled, not at the deadline.
	left := opts.timeout()
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	upgrade.WaitStrategy, upgrade.Timeout = opts.wait(), max(left/2, time.Second)
	uctx, stop := untilCanceled(ctx)
	defer stop()
	return upgrade.RunWithContext(uctx, name, ch, values)
}
