package chartrender

import (
	"fmt"
	"strings"
)

// Hook is one of a chart's hooks: the template that makes it and the events it fires on.
type Hook struct {
	Template string
	Kind     string
	Name     string
	Events   []string
}

// HookError refuses a chart with hooks: render mode runs none (see the package's doc).
type HookError struct {
	Chart string
	Hooks []Hook
}

func (e *HookError) Error() string {
	var parts []string
	for _, h := range e.Hooks {
		parts = append(parts, fmt.Sprintf("%s (%s %s, on %s)", h.Template, h.Kind, h.Name, strings.Join(h.Events, ",")))
	}
	return fmt.Sprintf("chart %s has Helm hooks, which render mode does not run: %s; remove them, or deliver the chart in Helm mode",
		e.Chart, strings.Join(parts, "; "))
}
