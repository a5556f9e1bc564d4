package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cluster-registry/sdk/multicluster"
)

// manifest is one object of -f's files, and where it came from (file, and document number).
type manifest struct {
	obj    *unstructured.Unstructured
	source string
}

// String is the object as kubectl names it: kind.group/name, with its namespace if it gives one.
func (m manifest) String() string {
	gvk := m.obj.GroupVersionKind()
	kind := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		kind += "." + gvk.Group
	}
	return kind + "/" + m.obj.GetName()
}

// maxManifestFile bounds one file: manifests are text a person writes, not data.
const maxManifestFile = 16 << 20

// readManifests reads -f's files and directories, as kubectl apply -f reads them: a directory's
// .yaml, .yml and .json files (not its subdirectories), in name order, each a stream of YAML or
// JSON documents; a List's items are objects of their own. Every problem is named with its file
// and document, and none is applied anywhere if any file has one.
func readManifests(paths []string) ([]manifest, error) {
	var files []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("-f %s: %w", p, err)
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("-f %s: %w", p, err)
		}
		found := false
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
				files, found = append(files, filepath.Join(p, e.Name())), true
			}
		}
		if !found {
			return nil, fmt.Errorf("-f %s: the directory has no .yaml, .yml or .json file", p)
		}
	}
	var out []manifest
	var errs []error
	for _, f := range files {
		ms, err := readManifestFile(f)
		out = append(out, ms...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-f %s: no object in the files", strings.Join(paths, ", "))
	}
	seen := map[string]string{}
	for _, m := range out {
		key := m.String() + " in " + m.obj.GetNamespace()
		if first, dup := seen[key]; dup {
			return nil, fmt.Errorf("%s: %s is also in %s; each object once", m.source, m, first)
		}
		seen[key] = m.source
	}
	return out, nil
}

func readManifestFile(path string) ([]manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifestFile+1))
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", path, err)
	}
	if len(data) > maxManifestFile {
		return nil, fmt.Errorf("-f %s: larger than %d MiB", path, maxManifestFile>>20)
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	starts := yamlDocumentStarts(data)
	var out []manifest
	var errs []error
	for doc := 1; ; doc++ {
		var fields map[string]any
		err := decoder.Decode(&fields)
		if errors.Is(err, io.EOF) {
			break
		}
		source := fmt.Sprintf("%s, document %d", path, doc)
		if err != nil {
			// The rest of the stream cannot be read past a document that does not parse.
			if doc <= len(starts) {
				err = atFileLine(err, starts[doc-1])
			}
			return out, errors.Join(append(errs, fmt.Errorf("%s: %w", source, err))...)
		}
		if len(fields) == 0 {
			continue // an empty document, as between two "---"
		}
		u := &unstructured.Unstructured{Object: fields}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", source, err))
				continue
			}
			for i := range list.Items {
				m := manifest{obj: &list.Items[i], source: fmt.Sprintf("%s, item %d", source, i+1)}
				if err := m.check(); err != nil {
					errs = append(errs, err)
					continue
				}
				out = append(out, m)
			}
			continue
		}
		m := manifest{obj: u, source: source}
		if err := m.check(); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, m)
	}
	return out, errors.Join(errs...)
}

// check refuses an object that no server could take: no apiVersion, kind or name.
func (m manifest) check() error {
	var missing []string
	if m.obj.GetAPIVersion() == "" {
		missing = append(missing, "apiVersion")
	}
	if m.obj.GetKind() == "" {
		missing = append(missing, "kind")
	}
	if m.obj.GetName() == "" {
		missing = append(missing, "metadata.name")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: no %s", m.source, strings.Join(missing, ", "))
	}
	return nil
}

// applyManifests applies (or deletes) the objects on one member, in the files' order (deleted in
// the reverse order), with server-side apply as the fanout-deploy field manager. Each member
// maps each kind with its own API: a kind it does not serve is its error alone, and the table
// says which objects were applied there before it. A namespaced object without a namespace goes
// to --member-namespace.
func applyManifests(opts *options, manifests []manifest) func(context.Context, *multicluster.Member) (string, error) {
	return func(ctx context.Context, m *multicluster.Member) (string, error) {
		cl, err := m.Client(ctx)
		if err != nil {
			return "", err
		}
		order := manifests
		if opts.delete {
			order = slices.Clone(manifests)
			slices.Reverse(order)
		}
		var done []string
		for _, mf := range order {
			obj := mf.obj.DeepCopy()
			what, err := applyOne(ctx, cl, opts, obj)
			if err != nil {
				// What and why first: the table shows an error's first 160 characters.
				if len(done) > 0 {
					return "", fmt.Errorf("%s: %w (%s); done before it: %s", mf, err, mf.source, strings.Join(done, ", "))
				}
				return "", fmt.Errorf("%s: %w (%s)", mf, err, mf.source)
			}
			done = append(done, mf.String()+" "+what)
		}
		return strings.Join(done, ", "), nil
	}
}

// applyOne applies, deletes or waits for one object, and says what happened to it.
func applyOne(ctx context.Context, cl client.Client, opts *options, obj *unstructured.Unstructured) (string, error) {
	namespaced, err := cl.IsObjectNamespaced(obj)
	if meta.IsNoMatchError(err) {
		if opts.delete {
			// A member that does not serve the kind has no such object: undoing an apply that
			// stopped at this kind must go on to the objects applied before it.
			return "not served here (nothing to delete)", nil
		}
		return "", &notServedError{kind: obj.GetKind(), apiVersion: obj.GetAPIVersion(), err: err}
	}
	if err != nil {
		return "", err
	}
	if namespaced && obj.GetNamespace() == "" {
		obj.SetNamespace(opts.memberNamespace)
	}
	if !namespaced {
		obj.SetNamespace("")
	}
	if opts.delete {
		var dryRun []client.DeleteOption
		if opts.dryRun {
			dryRun = append(dryRun, client.DryRunAll)
		}
		switch err := cl.Delete(ctx, obj, dryRun...); {
		case apierrors.IsNotFound(err):
			return "not found", nil
		case meta.IsNoMatchError(err):
			return "not served here (nothing to delete)", nil
		case err != nil:
			return "", err
		case opts.dryRun:
			return "would be deleted", nil
		}
		return "deleted", nil
	}
	applyOpts := []client.ApplyOption{client.FieldOwner(fieldManager), client.ForceOwnership}
	if opts.dryRun {
		applyOpts = append(applyOpts, client.DryRunAll)
	}
	if err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), applyOpts...); err != nil {
		return "", err
	}
	if opts.dryRun {
		return "would be applied", nil
	}
	if !opts.wait || !isWorkload(obj) {
		return "applied", nil
	}
	status, err := waitForWorkload(ctx, cl, obj)
	if err != nil {
		return "", err
	}
	return "applied, " + status, nil
}

// isWorkload reports whether --wait waits for obj: the kinds kubectl rollout status follows.
func isWorkload(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.Group == "apps" && (gvk.Kind == "Deployment" || gvk.Kind == "StatefulSet" || gvk.Kind == "DaemonSet")
}

// waitForWorkload waits until the workload's controller has rolled out the generation applied,
// as kubectl rollout status judges it, and says so; or, when ctx ends first, says how far it got.
func waitForWorkload(ctx context.Context, cl client.Client, applied *unstructured.Unstructured) (string, error) {
	if deadline, ok := ctx.Deadline(); ok {
		// Stop a little before the member's timeout, so that the error says how far it got.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-time.Until(deadline)/10))
		defer cancel()
	}
	generation := applied.GetGeneration()
	var progress string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(applied.GroupVersionKind())
		if err := cl.Get(ctx, client.ObjectKeyFromObject(applied), live); err != nil {
			return false, err
		}
		var done bool
		done, progress = rolledOut(live, generation)
		return done, nil
	})
	if err != nil && ctx.Err() != nil {
		return "", fmt.Errorf("rollout of generation %d not complete (%s)", generation, progress)
	}
	return progress, err
}

// rolledOut says whether a Deployment, StatefulSet or DaemonSet has rolled out generation, and how
// far it has got, from its status as its controller writes it.
func rolledOut(u *unstructured.Unstructured, generation int64) (bool, string) {
	num := func(path ...string) int64 {
		n, _, _ := unstructured.NestedInt64(u.Object, path...)
		return n
	}
	observed := num("status", "observedGeneration")
	if u.GetKind() == "DaemonSet" {
		desired, updated, available := num("status", "desiredNumberScheduled"), num("status", "updatedNumberScheduled"), num("status", "numberAvailable")
		return observed >= generation && updated == desired && available == desired,
			fmt.Sprintf("observed generation %d; %d of %d scheduled updated, %d available", observed, updated, desired, available)
	}
	replicas := int64(1)
	if r, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); found {
		replicas = r
	}
	updated, ready := num("status", "updatedReplicas"), num("status", "readyReplicas")
	if u.GetKind() == "Deployment" {
		available, total := num("status", "availableReplicas"), num("status", "replicas")
		return observed >= generation && updated == replicas && total == replicas && available == replicas,
			fmt.Sprintf("observed generation %d; %d of %d replicas updated, %d available", observed, updated, replicas, available)
	}
	return observed >= generation && updated == replicas && ready == replicas,
		fmt.Sprintf("observed generation %d; %d of %d replicas updated, %d ready", observed, updated, replicas, ready)
}

// notServedError is a member's error for a kind it does not serve.
type notServedError struct {
	kind, apiVersion string
	err              error
}

func (e *notServedError) Error() string {
	return fmt.Sprintf("this member does not serve %s (%s)", e.kind, e.apiVersion)
}

func (e *notServedError) Unwrap() error { return e.err }

// yamlDocumentStarts is the line of the file (from 1) on which each document of a YAML stream
// starts, split as utilyaml's YAMLReader splits it (the decoder's): at a line of "---" alone, an
// empty document not counted.
func yamlDocumentStarts(data []byte) []int {
	var starts []int
	start, lines := 0, 0 // the current document's first line, and how many it has
	for i, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if rest, ok := bytes.CutPrefix(line, []byte("---")); ok && len(bytes.TrimSpace(rest)) == 0 {
			if lines > 0 {
				starts = append(starts, start)
			}
			lines = 0
			continue
		}
		if lines == 0 {
			start = i + 1
		}
		lines++
	}
	if lines > 0 {
		starts = append(starts, start)
	}
	return starts
}

// yamlErrorLine is where a YAML parser's error says the problem is, counted from the document's
// first line.
var yamlErrorLine = regexp.MustCompile(`yaml: line (\d+):`)

// atFileLine makes the line a YAML error names count from the file's first line, not the
// document's, for a document that starts on line first.
func atFileLine(err error, first int) error {
	m := yamlErrorLine.FindStringSubmatchIndex(err.Error())
	if m == nil {
		return err
	}
	msg := err.Error()
	n, _ := strconv.Atoi(msg[m[2]:m[3]])
	return errors.New(msg[:m[2]] + strconv.Itoa(n+first-1) + msg[m[3]:])
}
