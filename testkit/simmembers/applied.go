package simmembers

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The applied store: what a server-side apply client (package delivery) writes to a member's
// ConfigMaps, kept, answered and watched apart from the 100 fixed ConfigMaps above. A list or
// watch of /api/v1/configmaps with a labelSelector serves this store (every object in it; the
// benchmarks label all they apply), a PATCH of a namespaced ConfigMap stores the applied object
// with the field manager's Apply entry a real server would record, and GET and DELETE read and
// remove it.
type appliedStore struct {
	mu       sync.Mutex
	objects  map[string]map[string]any // by namespace/name
	version  int64
	watchers []*watcher
	applies  int64
	// drifted are the objects /debug/drift changed, by key, with when; corrections are how long
	// each took to be applied back, in the order they were.
	drifted     map[string]time.Time
	corrections []time.Duration
	lastApply   time.Time // when an apply last changed something
}

// appliedVersion starts the store's resourceVersions above the fixed list's.
const appliedVersion = 100000

// isSelectedWatch reports whether path is a watch of the applied store.
func isSelectedWatch(path string) bool {
	p, query, _ := strings.Cut(path, "?")
	return p == "/api/v1/configmaps" && strings.Contains(query, "watch=true") && strings.Contains(query, "labelSelector=")
}

func (s *appliedStore) watch(w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchers = append(s.watchers, w)
}

func (s *appliedStore) unwatch(w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchers = slices.DeleteFunc(s.watchers, func(o *watcher) bool { return o == w })
}

// initialEvents are a selected watch's first events, when it asks for them.
func (s *appliedStore) initialEvents(path string) []byte {
	if !strings.Contains(path, "sendInitialEvents=true") {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, o := range s.objects {
		data, _ := json.Marshal(o)
		b.WriteString(`{"type":"ADDED","object":` + string(data) + "}\n")
	}
	b.WriteString(`{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"` +
		strconv.FormatInt(appliedVersion+s.version, 10) + `","annotations":{"k8s.io/initial-events-end":"true"}}}}` + "\n")
	return []byte(b.String())
}

// list answers a selected list.
func (s *appliedStore) list() (int, string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	items := make([]map[string]any, 0, len(s.objects))
	for _, o := range s.objects {
		items = append(items, o)
	}
	data, _ := json.Marshal(map[string]any{"kind": "ConfigMapList", "apiVersion": "v1",
		"metadata": map[string]any{"resourceVersion": strconv.FormatInt(appliedVersion+s.version, 10)}, "items": items})
	return http.StatusOK, "application/json", string(data)
}

// apply stores a server-side apply of a ConfigMap, as its field manager's Apply entry says, and
// tells the selected watches.
func (s *appliedStore) apply(namespace, name, query string, body []byte) (int, string, string) {
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		return http.StatusBadRequest, "application/json", `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"BadRequest","code":400}`
	}
	q, _ := url.ParseQuery(query)
	manager := q.Get("fieldManager")
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	meta["namespace"], meta["name"] = namespace, name
	s.mu.Lock()
	key := namespace + "/" + name
	old := s.objects[key]
	if old != nil && sameApplied(old, obj) {
		s.mu.Unlock()
		data, _ := json.Marshal(old)
		return http.StatusOK, "application/json", string(data) // a no-op apply writes nothing
	}
	s.version++
	s.applies++
	s.lastApply = time.Now()
	if at, ok := s.drifted[key]; ok {
		delete(s.drifted, key)
		s.corrections = append(s.corrections, time.Since(at))
	}
	meta["uid"] = "00000000-0000-0000-0002-" + strconv.FormatInt(100000000000+int64(len(s.objects)), 10)
	meta["resourceVersion"] = strconv.FormatInt(appliedVersion+s.version, 10)
	meta["creationTimestamp"] = "2026-01-01T00:00:00Z"
	meta["managedFields"] = []any{map[string]any{"manager": manager, "operation": "Apply", "apiVersion": "v1",
		"time": time.Now().UTC().Format(time.RFC3339), "fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:data": map[string]any{}}}}
	s.objects[key] = obj
	kind := "MODIFIED"
	if old == nil {
		kind = "ADDED"
	}
	data, _ := json.Marshal(obj)
	watchers := slices.Clone(s.watchers)
	s.mu.Unlock()
	event := []byte(`{"type":"` + kind + `","object":` + string(data) + "}\n")
	for _, w := range watchers {
		w.send(event)
	}
	return http.StatusOK, "application/json", string(data)
}

// sameApplied: applying obj over old changes nothing (its labels and data are old's).
func sameApplied(old, obj map[string]any) bool {
	a, _ := json.Marshal([]any{old["data"], old["metadata"].(map[string]any)["labels"]})
	b, _ := json.Marshal([]any{obj["data"], obj["metadata"].(map[string]any)["labels"]})
	return string(a) == string(b)
}

// get answers a GET of an applied ConfigMap, or nil when there is none.
func (s *appliedStore) get(namespace, name string) (int, string, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objects[namespace+"/"+name]
	if o == nil {
		return 0, "", "", false
	}
	data, _ := json.Marshal(o)
	return http.StatusOK, "application/json", string(data), true
}

// lastApplied is when an apply last changed something, in Unix microseconds (0 for never): what
// /debug/lastapply answers.
func (s *appliedStore) lastApplied() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastApply.IsZero() {
		return 0
	}
	return s.lastApply.UnixMicro()
}

// count is how many applies changed something on the member, for /debug/applies.
func (s *appliedStore) count() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applies
}

// drift changes one applied object as someone editing it by hand would (its data, and the field
// manager's entry losing the fields taken from it), remembers when, and tells the watches: what
// /debug/drift does, for measuring how soon a controller puts it back.
func (s *appliedStore) drift() int {
	s.mu.Lock()
	var key string
	for k := range s.objects {
		if _, ok := s.drifted[k]; !ok {
			key = k
			break
		}
	}
	if key == "" {
		s.mu.Unlock()
		return 0
	}
	old := s.objects[key]
	obj := map[string]any{}
	for k, v := range old {
		obj[k] = v
	}
	meta := map[string]any{}
	for k, v := range old["metadata"].(map[string]any) {
		meta[k] = v
	}
	obj["metadata"] = meta
	obj["data"] = map[string]any{"k": "edited by hand"}
	s.version++
	meta["resourceVersion"] = strconv.FormatInt(appliedVersion+s.version, 10)
	if mf, ok := meta["managedFields"].([]any); ok && len(mf) > 0 {
		entry := map[string]any{}
		for k, v := range mf[0].(map[string]any) {
			entry[k] = v
		}
		entry["fieldsV1"] = map[string]any{}
		meta["managedFields"] = []any{entry, map[string]any{"manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1",
			"time": time.Now().UTC().Format(time.RFC3339), "fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:data": map[string]any{"f:k": map[string]any{}}}}}
	}
	s.objects[key] = obj
	if s.drifted == nil {
		s.drifted = map[string]time.Time{}
	}
	s.drifted[key] = time.Now()
	data, _ := json.Marshal(obj)
	watchers := slices.Clone(s.watchers)
	s.mu.Unlock()
	event := []byte(`{"type":"MODIFIED","object":` + string(data) + "}\n")
	for _, w := range watchers {
		w.send(event)
	}
	return 1
}

// correctionTimes are how long each drifted object took to be applied back, in microseconds,
// comma-separated: what /debug/corrections answers.
func (s *appliedStore) correctionTimes() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	parts := make([]string, len(s.corrections))
	for i, d := range s.corrections {
		parts[i] = strconv.FormatInt(d.Microseconds(), 10)
	}
	return strings.Join(parts, ",")
}
