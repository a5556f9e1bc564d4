package main

import (
	"bytes"
	"encoding/json"
	"net/url"

	"k8s.io/client-go/tools/cache"

	"github.com/cluster-registry/sdk/multicluster"
)

// The lists a UI polls (GET /clusters, /v0/clusters, /v0/releases) are computed and encoded once
// per change of what they read, and served again until then (package answercache): with ETag and
// If-None-Match, a poll of an unchanged fleet costs its caller's authorization and a 304.
const (
	// keptAnswers bounds the answers kept: one per route, cluster set and query that callers poll.
	keptAnswers = 64
	// keptAnswerBytes bounds their bytes: at 1,000 members, /v0/clusters is about 1.2 MB.
	keptAnswerBytes = 64 << 20
)

// inputs are the versions of everything a polled list is computed from, read before it is: the
// registry's side (registry: Clusters joining, changing and leaving, and Releases), each member
// cache's Generation and the fleet's status; and for GET /clusters, whose answer carries it, the
// feed's revision.
type inputs struct {
	registry, nodes, pods, deployments, helm, feed uint64
	fleet                                          string
}

// inputs are the versions now, the feed's left out: the members' summaries are computed from
// these, so the feed compares them only when one moved, and an answer that does not carry the
// feed's revision is not computed again when the feed catches up with a change it already shows.
func (s *server) inputs() inputs {
	return inputs{
		registry: s.changes.Load(),
		nodes:    s.nodes.Generation(), pods: s.pods.Generation(), deployments: s.deployments.Generation(), helm: s.helm.Generation(),
		fleet: s.fleet.Status().String(),
	}
}

// followChanges counts the changes on the registry's side into s.changes: members joining and
// leaving the fleet, their Clusters changing, and the Releases /v0/releases reads. It returns
// what stops counting.
func (s *server) followChanges() (stop func(), err error) {
	count := func() { s.changes.Add(1) }
	unsubscribe := s.fleet.Subscribe(func(multicluster.MemberEvent) { count() })
	unsubscribeChanges := s.fleet.SubscribeChanges(func(*multicluster.Member) { count() })
	stop = func() { unsubscribe(); unsubscribeChanges() }
	for _, inf := range s.charts.releaseInformers {
		// Informers call handlers once the change is in their store: a list read after the count
		// moved finds it.
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { count() },
			UpdateFunc: func(old, obj any) { count() },
			DeleteFunc: func(any) { count() },
		}); err != nil {
			stop()
			return nil, err
		}
	}
	return stop, nil
}

// answerKey names an answer: its route, the cluster sets the caller may see it in (callers who
// may see different sets are sent different answers), and the query, in a canonical order.
func answerKey(route string, sets []string, query url.Values) string {
	var b bytes.Buffer
	b.WriteString(route)
	for _, ns := range sets {
		b.WriteString("|")
		b.WriteString(ns)
	}
	b.WriteString("?")
	b.WriteString(query.Encode())
	return b.String()
}

// keptAnswer is the answer kept under key, computed and encoded with v first when what it reads
// changed since (version, read before v reads anything). indent is writeJSON's form; the lists
// a UI polls are compact.
func (s *server) keptAnswer(key string, version inputs, indent bool, v func() any) (response, error) {
	a, err := s.answers.Answer(key, version, "application/json", func() ([]byte, error) { return encodeJSON(v(), indent) })
	if err != nil {
		return response{}, err
	}
	return response{Kept: a}, nil
}

// encodeJSON is v as writeJSON writes it (indent), or without indentation: at 1,000 members
// indenting cost as much as the rest of a list.
func encodeJSON(v any, indent bool) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
