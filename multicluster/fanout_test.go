package multicluster

import (
	"context"
	"errors"
	"fmt"
	"golang.org/x/sync/errgroup"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// staticMembers is a fleet of n offline Clusters named m0..m(n-1), for fan-out logic that needs
// no member to answer.
func staticMembers(t testing.TB, n int) []*Member {
	t.Helper()
	clusters := make([]v1alpha1.Cluster, n)
	for i := range clusters {
		clusters[i] = *offlineCluster(fmt.Sprintf("m%d", i), fmt.Sprintf("m%d.example.com", i), nil)
	}
	r, err := access.NewResolver(access.ResolverOptions{ClientIP: testClientIP})
	if err != nil {
		t.Fatal(err)
	}
	return MembersOf(r, clusters, FleetOptions{})
}

func TestMapOrderValuesAndConcurrencyLimit(t *testing.T) {
	members := staticMembers(t, 12)
	var running, peak atomic.Int32
	results := Map(context.Background(), members, func(_ context.Context, m *Member) (string, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		return "value of " + m.Name().Name, nil
	}, Concurrency(3))
	// At most 3 at once, and more than one: on a loaded machine a member may finish before the
	// third starts, so exactly 3 is not promised.
	if p := peak.Load(); p > 3 || p < 2 {
		t.Errorf("peak concurrency %d, want 2 or 3", p)
	}
	for i, r := range results {
		if r.Member != members[i] || r.Err != nil || r.Value != "value of "+members[i].Name().Name || r.Attempts != 1 {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	if len(results.Succeeded()) != 12 || len(results.Failed()) != 0 || results.Err() != nil {
		t.Errorf("succeeded %d, failed %d, err %v", len(results.Succeeded()), len(results.Failed()), results.Err())
	}
}

// A member whose callback hangs, ignoring its context, is reported at its timeout, and delays
// nobody else; a panic is that member's error.
func TestMapSlowMemberAndPanic(t *testing.T) {
	members := staticMembers(t, 4)
	release := make(chan struct{})
	defer close(release)
	start := time.Now()
	results := Map(context.Background(), members, func(_ context.Context, m *Member) (int, error) {
		switch m.Name().Name {
		case "m1":
			<-release // ignores its context
		case "m2":
			panic("callback bug")
		}
		return 1, nil
	}, Timeout(time.Second))
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("fan-out took %v with a 1s member timeout", elapsed)
	}
	if !errors.Is(results[1].Err, context.DeadlineExceeded) || results[1].Duration < time.Second {
		t.Errorf("hanging member: %v after %v", results[1].Err, results[1].Duration)
	}
	var panicErr *PanicError
	if !errors.As(results[2].Err, &panicErr) || panicErr.Value != "callback bug" || len(panicErr.Stack) == 0 {
		t.Errorf("panicking member: %v", results[2].Err)
	}
	// The healthy members finished long before the hanging one's timeout.
	if results[0].Err != nil || results[3].Err != nil || results[0].Duration > 500*time.Millisecond {
		t.Errorf("healthy members: %v (%v), %v", results[0].Err, results[0].Duration, results[3].Err)
	}
}

func TestMapCanaryAndStopAfter(t *testing.T) {
	members := staticMembers(t, 10)
	var calls atomic.Int32
	fail := func(_ context.Context, m *Member) error {
		calls.Add(1)
		if m.Name().Name == "m1" || m.Name().Name == "m5" || m.Name().Name == "m6" {
			return errors.New("boom")
		}
		return nil
	}
	results := ForEach(context.Background(), members, fail, Canary(2), NoRetry())
	if calls.Load() != 2 || results[0].Err != nil || results[1].Err == nil {
		t.Fatalf("canary: %d calls; %v", calls.Load(), results)
	}
	for _, r := range results[2:] {
		if !errors.Is(r.Err, ErrNotStarted) || !strings.Contains(r.Err.Error(), "1 of 2 canary members failed") || r.Attempts != 0 {
			t.Errorf("after a failed canary, %s: %v", r.Member, r.Err)
		}
	}
	// Not started is not failed, and the work is still not done.
	if failed, notStarted := len(results.Failed()), len(results.NotStarted()); failed != 1 || notStarted != 8 {
		t.Errorf("after a failed canary: %d failed and %d not started, want 1 and 8", failed, notStarted)
	}
	if err := results.Err(); err == nil || strings.Count(err.Error(), "\n") != 8 {
		t.Errorf("Err must name the failed member and the 8 not started, one line each: %v", err)
	}

	calls.Store(0)
	results = ForEach(context.Background(), members, fail, Concurrency(1), StopAfter(2), NoRetry())
	// Sequential: m0..m5 run, m1 and m5 fail, then nothing more starts.
	if calls.Load() != 6 {
		t.Errorf("StopAfter(2) ran %d members, want 6", calls.Load())
	}
	for _, r := range results[6:] {
		if !errors.Is(r.Err, ErrNotStarted) || !strings.Contains(r.Err.Error(), "stopped after 2 failures") {
			t.Errorf("%s: %v", r.Member, r.Err)
		}
	}
}

func TestMapSkipNotReady(t *testing.T) {
	members := staticMembers(t, 3)
	notReady := members[1].Cluster().DeepCopy()
	notReady.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonUnreachable})
	members[1].setCluster(notReady)
	var ran []string
	results := ForEach(context.Background(), members, func(_ context.Context, m *Member) error {
		ran = append(ran, m.Name().Name)
		return nil
	}, SkipNotReady(), Concurrency(1))
	if strings.Join(ran, ",") != "m0,m2" || !errors.Is(results[1].Err, ErrNotReady) || results[1].Attempts != 0 {
		t.Errorf("ran %v; m1: %v", ran, results[1].Err)
	}
}

// Cancelling the context starts nothing more, cancels what runs, and returns what finished.
func TestMapCancel(t *testing.T) {
	members := staticMembers(t, 6)
	ctx, cancel := context.WithCancel(context.Background())
	results := ForEach(ctx, members, func(ctx context.Context, m *Member) error {
		if m.Name().Name == "m1" {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}, Concurrency(1))
	if results[0].Err != nil || !errors.Is(results[1].Err, context.Canceled) {
		t.Errorf("before and at the cancel: %v, %v", results[0].Err, results[1].Err)
	}
	for _, r := range results[2:] {
		if !errors.Is(r.Err, ErrNotStarted) || !errors.Is(r.Err, context.Canceled) || r.Attempts != 0 {
			t.Errorf("%s after cancel: %v", r.Member, r.Err)
		}
	}

	// An overall timeout is a deadline on the same context.
	results = ForEach(context.Background(), members, func(ctx context.Context, _ *Member) error {
		<-ctx.Done()
		return ctx.Err()
	}, Concurrency(2), OverallTimeout(50*time.Millisecond))
	if failed, notStarted := len(results.Failed()), len(results.NotStarted()); failed != 2 || notStarted != 4 {
		t.Errorf("overall timeout: %d failed and %d not started, want the 2 running failed and 4 not started", failed, notStarted)
	}
}

func TestMapRetriesWhatIsSafeToRetry(t *testing.T) {
	members := staticMembers(t, 1)
	status := func(code int32, retryAfter int32) error {
		s := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: metav1.StatusReasonUnknown}}
		if retryAfter > 0 {
			s.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: retryAfter}
		}
		return s
	}
	dialRefused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &url.Error{Op: "Post", URL: "https://m0.example.com/api", Err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}}
	fast := Retry(wait.Backoff{Steps: 4, Duration: time.Millisecond})
	idempotent := RetryIf(IsTransient)
	for _, tc := range []struct {
		name         string
		errs         []error
		opts         []Option
		wantAttempts int
		wantErr      bool
	}{
		{"refused then ok", []error{dialRefused}, nil, 2, false},
		{"no such host then ok", []error{&net.DNSError{Err: "no such host", Name: "m0.example.com", IsNotFound: true}}, nil, 2, false},
		{"429 then ok", []error{status(429, 0)}, nil, 2, false},
		{"429 with Retry-After", []error{status(429, 1)}, nil, 2, false},
		{"503 with Retry-After", []error{status(503, 1)}, nil, 2, false},
		// A 401 is retried only when the credentials changed since (see TestRotationUnderLoad).
		{"a 401 to unchanged credentials is final", []error{apierrors.NewUnauthorized("x")}, nil, 1, true},
		// The member may have committed these before the answer was lost.
		{"500 is final", []error{status(500, 0)}, nil, 1, true},
		{"503 is final", []error{status(503, 0)}, nil, 1, true},
		{"a reset connection is final", []error{reset}, nil, 1, true},
		{"EPIPE is final", []error{syscall.EPIPE}, nil, 1, true},
		{"RetryIf(IsTransient) retries 503 and 500", []error{status(503, 0), status(500, 0)}, []Option{idempotent}, 3, false},
		{"RetryIf(IsTransient) retries a reset", []error{reset}, []Option{idempotent}, 2, false},
		{"RetryIf(IsTransient) leaves 404", []error{apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "x")}, []Option{idempotent}, 1, true},
		{"404 is final", []error{apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "x")}, nil, 1, true},
		{"a plain error is final", []error{errors.New("bad input")}, nil, 1, true},
		{"gives up after Steps", []error{dialRefused, dialRefused, dialRefused, dialRefused}, nil, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			start := time.Now()
			results := ForEach(context.Background(), members, func(context.Context, *Member) error {
				if i := int(n.Add(1)) - 1; i < len(tc.errs) {
					return tc.errs[i]
				}
				return nil
			}, append([]Option{fast}, tc.opts...)...)
			r := results[0]
			require.Equal(t, tc.wantAttempts, r.Attempts, "attempts; error %v", r.Err)
			require.Equal(t, tc.wantErr, r.Err != nil, "error %v", r.Err)
			if strings.Contains(tc.name, "Retry-After") {
				require.GreaterOrEqual(t, time.Since(start), time.Second, "Retry-After: 1 was not waited for")
			}
		})
	}
}

// A create that the member committed but answered with 500, or whose connection broke before the
// answer, is sent once: retrying it would make a second object from generateName.
func TestRetryNeverRepeatsACommittedCreate(t *testing.T) {
	for _, answer := range []string{"500", "reset"} {
		t.Run(answer, func(t *testing.T) {
			var creates atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost {
					http.NotFound(w, r)
					return
				}
				creates.Add(1) // committed
				if answer == "reset" {
					conn, _, _ := w.(http.Hijacker).Hijack()
					_ = conn.(*net.TCPConn).SetLinger(0)
					_ = conn.Close()
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":500,"message":"etcd answer lost"}`))
			}))
			defer srv.Close()
			kube := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
			results := ForEach(context.Background(), staticMembers(t, 1), func(ctx context.Context, _ *Member) error {
				_, err := kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "job-"}}, metav1.CreateOptions{})
				return err
			}, Retry(wait.Backoff{Steps: 3, Duration: time.Millisecond}))
			require.Error(t, results[0].Err)
			require.Equal(t, int32(1), creates.Load(), "creates sent; result %v", results[0].Err)
			require.Equal(t, 1, results[0].Attempts)
		})
	}
}

// A Retry-After longer than what is left of the member's Timeout is not waited for: the member
// reports the answer at once, not a timeout long after.
func TestRetryAfterIsBoundedByTheTimeout(t *testing.T) {
	start := time.Now()
	results := ForEach(context.Background(), staticMembers(t, 1), func(context.Context, *Member) error {
		return apierrors.NewTooManyRequests("busy", 30)
	}, Timeout(2*time.Second))
	require.Less(t, time.Since(start), time.Second)
	err := results[0].Err
	require.True(t, apierrors.IsTooManyRequests(err), "%v", err)
	require.Contains(t, err.Error(), "attempt 1 of 3; not retried, as the wait of 30s would pass the deadline")
}

// Without a timeout or a context that can end, callbacks run in the member's own goroutine; a
// panic is still that member's error, with its value and stack.
func TestPanicWithoutTimeout(t *testing.T) {
	results := Map(context.Background(), staticMembers(t, 2), func(_ context.Context, m *Member) (int, error) {
		if m.Name().Name == "m1" {
			panic(fmt.Sprintf("bug in %s", m))
		}
		return 7, nil
	})
	var panicErr *PanicError
	if !errors.As(results[1].Err, &panicErr) || panicErr.Value != "bug in fleet/m1" || len(panicErr.Stack) == 0 || results[1].Value != 0 {
		t.Errorf("panicking member: %v, value %d", results[1].Err, results[1].Value)
	}
	if results[0].Err != nil || results[0].Value != 7 {
		t.Errorf("healthy member: %v, %d", results[0].Err, results[0].Value)
	}
}

func TestResultsTable(t *testing.T) {
	members := staticMembers(t, 2)
	results := ForEach(context.Background(), members, func(_ context.Context, m *Member) error {
		if m.Name().Name == "m1" {
			return fmt.Errorf("applying: %w", &apierrors.StatusError{ErrStatus: metav1.Status{Code: http.StatusForbidden, Message: "forbidden\nacross lines"}})
		}
		return nil
	}, NoRetry())
	table := results.String()
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "MEMBER ENDPOINT RESULT ATTEMPTS DURATION" {
		t.Fatalf("table:\n%s", table)
	}
	if f := strings.Fields(lines[1]); f[0] != "fleet/m0" || f[1] != "m0.example.com" || f[2] != "ok" || f[3] != "1" {
		t.Errorf("row: %q", lines[1])
	}
	if !strings.Contains(lines[2], "applying: forbidden across lines") {
		t.Errorf("failed row: %q", lines[2])
	}
	if err := results.Err(); err == nil || !strings.HasPrefix(err.Error(), "fleet/m1: applying") {
		t.Errorf("Err() = %v", err)
	}
}

// A member's error quotes what its API server said; the table, printed to people's terminals,
// shows control characters instead of sending them, and cuts a long error between characters.
func TestResultsTableShowsNoControlCharacters(t *testing.T) {
	results := ForEach(context.Background(), staticMembers(t, 1), func(context.Context, *Member) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Code: http.StatusInternalServerError,
			Message: "\x1b[2J\x1b]52;c;ZXZpbA==\a\u009b1A\rowned \xff" + strings.Repeat("é", 100)}}
	}, NoRetry())
	row := strings.Split(results.String(), "\n")[1]
	if strings.ContainsAny(row, "\x1b\a\r\u009b") || !utf8.ValidString(row) {
		t.Fatalf("the row sends control characters: %q", row)
	}
	if !strings.Contains(row, "\uFFFD[2J\uFFFD]52;c;ZXZpbA==\uFFFD\uFFFD1A owned \uFFFDéé") || !strings.Contains(row, "é...") {
		t.Errorf("row: %q", row)
	}
}

func TestResultsTableShowsStringValues(t *testing.T) {
	results := Map(context.Background(), staticMembers(t, 3), func(_ context.Context, m *Member) (string, error) {
		switch m.Name().Name {
		case "m0":
			return "created", nil
		case "m1":
			return "", nil
		}
		return "ignored", errors.New("refused")
	}, NoRetry())
	lines := strings.Split(strings.TrimSpace(results.String()), "\n")
	for i, want := range []string{"created", "ok", "refused"} {
		if f := strings.Fields(lines[i+1]); f[2] != want {
			t.Errorf("row %d result %q, want %q", i, f[2], want)
		}
	}
	refused := ForEach(context.Background(), staticMembers(t, 1), func(context.Context, *Member) error {
		return fmt.Errorf("applying: %w", &url.Error{Op: "Patch", URL: "https://m0.example.com/apis/apps/v1/namespaces/default/deployments/web?fieldManager=x&force=true",
			Err: errors.New("dial tcp 10.0.0.1:443: connect: connection refused")})
	}, NoRetry())
	if row := strings.Split(refused.String(), "\n")[1]; !strings.Contains(row, "applying: Patch /apis/apps/v1/namespaces/default/deployments/web: dial tcp 10.0.0.1:443: connect: connection refused") {
		t.Errorf("URL errors are not shortened: %q", row)
	}
	durations := Map(context.Background(), staticMembers(t, 1), func(context.Context, *Member) (time.Duration, error) {
		return 1500 * time.Millisecond, nil
	})
	if f := strings.Fields(strings.Split(durations.String(), "\n")[1]); f[2] != "1.5s" {
		t.Errorf("a fmt.Stringer value shows as %q", f[2])
	}
}

func TestMembersOfFilters(t *testing.T) {
	clusters := []v1alpha1.Cluster{*offlineCluster("b", "b.example.com", nil), *offlineCluster("a", "a.example.com", nil), *offlineCluster("c", "c.example.com", nil)}
	clusters[0].Labels = map[string]string{"env": "dev"}
	clusters[1].Labels = map[string]string{"env": "prod"}
	clusters[2].Namespace = "other"
	r, _ := access.NewResolver(access.ResolverOptions{})
	require.Equal(t, "[fleet/a fleet/b other/c]", fmt.Sprint(MembersOf(r, clusters, FleetOptions{})), "ordered by namespace and name")
	require.Equal(t, "[fleet/a fleet/b]", fmt.Sprint(MembersOf(r, clusters, FleetOptions{Namespaces: []string{"fleet"}})))
	require.Equal(t, "[fleet/b]", fmt.Sprint(MembersOf(r, clusters, FleetOptions{Selector: labels.SelectorFromSet(labels.Set{"env": "dev"})})))

	again := *offlineCluster("a", "a2.example.com", nil)
	ms := MembersOf(r, append(clusters, again), FleetOptions{})
	require.Equal(t, "[fleet/a fleet/b other/c]", fmt.Sprint(ms))
	require.Equal(t, "a2.example.com", ms[0].Cluster().Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress, "a later Cluster of the same name replaces the earlier")
}

// setNotReady marks a member's Cluster Ready=False, as the health controller would.
func setNotReady(m *Member) {
	c := m.Cluster().DeepCopy()
	c.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonUnreachable})
	m.setCluster(c)
}

// A skipped member is not a failure: it fails no canary, counts towards no StopAfter, and is
// left out of Failed and Err. The canaries are the first members that run.
func TestSkippedIsNotFailed(t *testing.T) {
	members := staticMembers(t, 5)
	setNotReady(members[0])
	setNotReady(members[3])
	var ran []string
	results := ForEach(context.Background(), members, func(_ context.Context, m *Member) error {
		ran = append(ran, m.Name().Name)
		return nil
	}, Canary(1), SkipNotReady(), Concurrency(1), StopAfter(1))
	require.Equal(t, []string{"m1", "m2", "m4"}, ran)
	require.NoError(t, results.Err())
	require.Empty(t, results.Failed())
	require.Len(t, results.Succeeded(), 3)
	require.Len(t, results.Skipped(), 2)
	require.True(t, results[0].Skipped() && !results[0].Failed() && errors.Is(results[0].Err, ErrNotReady))
}

// OnResult is called exactly once for every member, whether it ran, was skipped or never
// started, whatever stopped the fan-out.
func TestOnResultReachesEveryMember(t *testing.T) {
	failM1 := func(_ context.Context, m *Member) error {
		if m.Name().Name == "m1" {
			return errors.New("boom")
		}
		return nil
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		opts []Option
	}{
		{"all run", context.Background(), nil},
		{"failed canary", context.Background(), []Option{Canary(2), NoRetry()}},
		{"stop after", context.Background(), []Option{Concurrency(1), StopAfter(1), NoRetry()}},
		{"skipped", context.Background(), []Option{SkipNotReady()}},
		{"cancelled", cancelled, []Option{Concurrency(2)}},
		{"refused options", context.Background(), []Option{StopAfter(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			members := staticMembers(t, 6)
			setNotReady(members[4])
			seen := map[string]int{}
			ForEach(tc.ctx, members, failM1, append(tc.opts, OnResult(func(o Outcome) { seen[o.Member.String()]++ }))...)
			require.Len(t, seen, len(members))
			for m, n := range seen {
				require.Equal(t, 1, n, "OnResult calls for %s", m)
			}
		})
	}
}

// StopAfter without Concurrency could never stop anything; the fan-out refuses it, runs nothing,
// and says why for every member.
func TestContradictoryOptionsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		opts []Option
		want string
	}{
		{[]Option{StopAfter(2)}, "StopAfter(2) needs Concurrency"},
		{[]Option{Timeout(-time.Second)}, "Timeout(-1s) is negative"},
		{[]Option{Canary(-1)}, "Canary(-1) is negative"},
	} {
		var calls atomic.Int32
		results := ForEach(context.Background(), staticMembers(t, 3), func(context.Context, *Member) error {
			calls.Add(1)
			return nil
		}, tc.opts...)
		require.Zero(t, calls.Load())
		for _, r := range results {
			require.ErrorIs(t, r.Err, ErrInvalidOptions)
			require.ErrorIs(t, r.Err, ErrNotStarted)
			require.ErrorContains(t, r.Err, tc.want)
		}
	}
}

// A timed-out member's error says what timed out, after how long, and which attempt it was.
func TestTimeoutSaysWhatTimedOut(t *testing.T) {
	hang := func(ctx context.Context, _ *Member) error { <-ctx.Done(); return ctx.Err() }
	results := ForEach(context.Background(), staticMembers(t, 1), hang, Timeout(100*time.Millisecond))
	var te *TimeoutError
	require.ErrorAs(t, results[0].Err, &te)
	require.ErrorIs(t, results[0].Err, context.DeadlineExceeded)
	require.Equal(t, "timed out after 100ms, attempt 1 of 3, member's server m0.example.com: the call had not returned", results[0].Err.Error())

	// A request's own error, when it came back before the member was abandoned, follows.
	require.Equal(t, "timed out after 50ms, attempt 2 of 3: listing pods: context deadline exceeded",
		(&TimeoutError{After: 50 * time.Millisecond, Attempt: 2, Attempts: 3, Err: fmt.Errorf("listing pods: %w", context.DeadlineExceeded)}).Error())

	results = ForEach(context.Background(), staticMembers(t, 3), hang, Concurrency(1), OverallTimeout(50*time.Millisecond))
	require.Equal(t, "fan-out timed out after 50ms, attempt 1 of 3, member's server m0.example.com: the call had not returned", results[0].Err.Error())
	require.Equal(t, "not started: fan-out timed out after 50ms", results[2].Err.Error())
	require.ErrorIs(t, results[2].Err, context.DeadlineExceeded)
}

// Map returns at a member's timeout while a callback that ignores its context runs on;
// TrackCallbacks lets the caller wait for it.
func TestTrackCallbacksWaitsForStragglers(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	release := make(chan struct{})
	var finished atomic.Bool
	var wg sync.WaitGroup
	results := ForEach(context.Background(), staticMembers(t, 2), func(context.Context, *Member) error {
		<-release // ignores its context
		finished.Store(true)
		return nil
	}, Timeout(20*time.Millisecond), TrackCallbacks(&wg))
	require.ErrorIs(t, results[0].Err, context.DeadlineExceeded)
	require.False(t, finished.Load(), "Map waited for the callback")
	close(release)
	wg.Wait()
	require.True(t, finished.Load())
}

// Results.Err's errors are *MemberError: the member, its attempts and the cause.
func TestResultsErrIsTyped(t *testing.T) {
	cause := errors.New("quota exceeded")
	members := staticMembers(t, 2)
	results := ForEach(context.Background(), members, func(_ context.Context, m *Member) error {
		if m.Name().Name == "m1" {
			return cause
		}
		return nil
	})
	var me *MemberError
	require.ErrorAs(t, results.Err(), &me)
	require.Same(t, members[1], me.Member)
	require.Equal(t, 1, me.Attempts)
	require.ErrorIs(t, me, cause)
	require.Equal(t, "fleet/m1: quota exceeded", me.Error())
}

// BenchmarkForEachOverhead: what a fan-out costs beside its calls, over 10 members whose callback
// does nothing, next to the same done by hand with errgroup (errgroup/members=10). Runs without
// servers (-short).
func BenchmarkForEachOverhead(b *testing.B) {
	members := staticMembers(b, 10)
	ctx := context.Background()
	nothing := func(context.Context, *Member) error { return nil }
	b.Run("members=10", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := ForEach(ctx, members, nothing, NoRetry()).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("errgroup/members=10", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var g errgroup.Group
			for _, m := range members {
				g.Go(func() error { return nothing(ctx, m) })
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
