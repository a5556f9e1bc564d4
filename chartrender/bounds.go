package chartrender

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"
)

// The bounds of one render when Options leave them zero.
const (
	DefaultTimeout  = 10 * time.Second
	DefaultMaxBytes = 32 << 20
)

// LimitError is a render that went over one of the Renderer's bounds (Options.Timeout,
// Options.MaxBytes). The Renderer keeps it like any other result, so the same input is not
// rendered again: a Release stays stalled on it until its chart or values change.
type LimitError struct {
	// Chart is the chart's name.
	Chart string
	// Limit says which bound, and where it was met: "took longer than 10s", "function repeat
	// would make 40 MiB, over 32 MiB".
	Limit string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("chart %s: rendering %s: a chart's templates run in the controller, bounded in time and size (chartrender.Options)", e.Chart, e.Limit)
}

// budget is one render's bounds, shared by its template functions. Go's templates cannot be
// stopped from outside, so the bounds act from inside: every function of sprig's that a template
// calls first checks that the render's time is not up, and those that make something as large
// as their arguments say (until, repeat, indent, randAlpha...) check its size before making it.
// A template that loops through functions therefore stops at its next call once its time is up.
// One that loops with no function at all ({{range 1000000000}}, or {{template}} nested to make
// exponentially much) cannot be stopped: the Renderer gives up waiting for it (Render returns the
// LimitError), and it ends when it ends.
type budget struct {
	chart    string
	maxBytes int64
	expired  atomic.Bool

	mu  sync.Mutex
	err *LimitError // the first bound met, if any
}

// exceed records the first bound met and returns it.
func (b *budget) exceed(limit string) *LimitError {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = &LimitError{Chart: b.chart, Limit: limit}
	}
	return b.err
}

// met is the first bound met, or nil.
func (b *budget) met() *LimitError {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// helmOwn are the names of template functions that Helm's engine (helm.sh/helm/v4/pkg/engine)
// defines itself or removes, over sprig's: they are left as Helm has them. TestHelmOwnIsHelms
// reads Helm's source to keep this list whole.
var helmOwn = map[string]bool{
	"env": true, "expandenv": true, "getHostByName": true,
	"include": true, "tpl": true, "required": true, "fail": true, "lookup": true,
	"toToml": true, "mustToToml": true, "fromToml": true,
	"toYaml": true, "mustToYaml": true, "toYamlPretty": true, "fromYaml": true, "fromYamlArray": true,
	"toJson": true, "mustToJson": true, "fromJson": true, "fromJsonArray": true,
	"mustToDuration": true, "durationSeconds": true, "durationMilliseconds": true,
	"durationMicroseconds": true, "durationNanoseconds": true, "durationMinutes": true,
	"durationHours": true, "durationDays": true, "durationWeeks": true, "durationRoundTo": true,
	"durationTruncateTo": true,
}

// sizes are the sprig functions whose result is as large as their arguments say: what each
// would make, in bytes (a list's item counted as 8), worked out before it is made.
var sizes = map[string]func(args []reflect.Value) int64{
	"until": func(a []reflect.Value) int64 { return 8 * abs(a[0].Int()) },
	"untilStep": func(a []reflect.Value) int64 {
		return 8 * steps(a[0].Int(), a[1].Int(), a[2].Int())
	},
	"seq": func(a []reflect.Value) int64 {
		// seq's ints arrive as one variadic slice: END, START END, or START STEP END.
		n := a[0]
		switch n.Len() {
		case 1:
			return 8 * abs(n.Index(0).Int())
		case 2:
			return 8 * steps(n.Index(0).Int(), n.Index(1).Int(), 1)
		case 3:
			return 8 * steps(n.Index(0).Int(), n.Index(2).Int(), n.Index(1).Int())
		}
		return 0
	},
	"repeat":       func(a []reflect.Value) int64 { return abs(a[0].Int()) * int64(a[1].Len()) },
	"indent":       indentSize,
	"nindent":      indentSize,
	"randAlphaNum": firstInt, "randAlpha": firstInt, "randAscii": firstInt, "randNumeric": firstInt,
	"randBytes": firstInt,
}

func indentSize(a []reflect.Value) int64 {
	s := a[1].String()
	return abs(a[0].Int())*int64(strings.Count(s, "\n")+2) + int64(len(s))
}

func firstInt(a []reflect.Value) int64 { return abs(a[0].Int()) }

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// steps is how many ints a range from start towards stop by step holds, at most.
func steps(start, stop, step int64) int64 {
	if step == 0 {
		return 0
	}
	return abs(stop-start)/abs(step) + 1
}

// funcs are sprig's functions as this render's templates get them: each checks the budget first.
func (b *budget) funcs() template.FuncMap {
	out := template.FuncMap{}
	for name, f := range sprig.TxtFuncMap() {
		if helmOwn[name] {
			continue
		}
		out[name] = b.bounded(name, f, sizes[name])
	}
	return out
}

var errorType = reflect.TypeFor[error]()

// check panics with the bound met once the render's time is up; text/template turns the panic
// of a function into its error.
func (b *budget) check() {
	if b.expired.Load() {
		panic(b.met())
	}
}

// bounded is f checking the budget (and, with size, what it would make) before each call. A
// function that cannot return an error panics with it, which text/template turns into one.
func (b *budget) bounded(name string, f any, size func([]reflect.Value) int64) any {
	if size == nil {
		// The shapes most of sprig's functions have, without reflect.MakeFunc's cost (about a
		// third of a microsecond a call, a tenth of a render that calls functions in a loop).
		switch f := f.(type) {
		case func(string) string:
			return func(s string) string { b.check(); return f(s) }
		case func(...any) string:
			return func(a ...any) string { b.check(); return f(a...) }
		case func(any) string:
			return func(a any) string { b.check(); return f(a) }
		case func(any) bool:
			return func(a any) bool { b.check(); return f(a) }
		case func(any, ...any) any:
			return func(a any, rest ...any) any { b.check(); return f(a, rest...) }
		case func(string, string) string:
			return func(x, y string) string { b.check(); return f(x, y) }
		case func(string, string, string) string:
			return func(x, y, z string) string { b.check(); return f(x, y, z) }
		case func(string, string) bool:
			return func(x, y string) bool { b.check(); return f(x, y) }
		case func(...any) []any:
			return func(a ...any) []any { b.check(); return f(a...) }
		case func(...any) map[string]any:
			return func(a ...any) map[string]any { b.check(); return f(a...) }
		case func(...any) int64:
			return func(a ...any) int64 { b.check(); return f(a...) }
		case func(any) int64:
			return func(a any) int64 { b.check(); return f(a) }
		}
	}
	v := reflect.ValueOf(f)
	t := v.Type()
	fail := func(err error) []reflect.Value {
		if t.NumOut() == 0 || t.Out(t.NumOut()-1) != errorType {
			panic(err)
		}
		out := make([]reflect.Value, t.NumOut())
		for i := range out {
			out[i] = reflect.Zero(t.Out(i))
		}
		out[len(out)-1] = reflect.ValueOf(err)
		return out
	}
	return reflect.MakeFunc(t, func(args []reflect.Value) []reflect.Value {
		if b.expired.Load() {
			return fail(b.met())
		}
		if size != nil {
			if n := size(args); n > b.maxBytes {
				return fail(b.exceed(fmt.Sprintf("function %s would make %s, over %s", name, bytesText(n), bytesText(b.maxBytes))))
			}
		}
		if t.IsVariadic() {
			return v.CallSlice(args)
		}
		return v.Call(args)
	}).Interface()
}

// bytesText is n in MiB when it is that large, else in bytes.
func bytesText(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
