package placement

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// preference is a Preference compiled.
type preference struct {
	weight float64
	prg    *program
}

// score is cl's score by the policy's preferences, or why it has none: a preference could not
// be evaluated (it reads resources, which are missing or too old: figuresWhy, the reason of
// those figures; otherwise Unscored).
func (c *Compiled) score(vars map[string]any, figuresWhy Reason, figuresMsg string) (float64, Reason, string) {
	total := 0.0
	for i, p := range c.prefer {
		v, err := p.prg.number(vars)
		if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			err = fmt.Errorf("the expression gave %v", v)
		}
		if err != nil {
			if figuresWhy != "" && strings.Contains(err.Error(), "no such key: resources") {
				return 0, figuresWhy, fmt.Sprintf("not scored: %s, which prefer[%d] reads (%v)", figuresMsg, i, err)
			}
			return 0, ReasonUnscored, fmt.Sprintf("not scored: prefer[%d] could not be evaluated: %v", i, err)
		}
		total += p.weight * v
	}
	return total, "", ""
}

// compilePrefer compiles the policy's preferences.
func compilePrefer(prefs []Preference) ([]preference, []error) {
	var out []preference
	var errs []error
	for i, p := range prefs {
		prg, err := compileNumber(p.CEL)
		if err != nil {
			errs = append(errs, fmt.Errorf("prefer[%d].cel: %w", i, err))
			continue
		}
		if p.Weight < 0 || p.Weight > 100 {
			errs = append(errs, fmt.Errorf("prefer[%d].weight: %d, want 0 to 100", i, p.Weight))
		}
		out = append(out, preference{weight: float64(max(p.Weight, 1)), prg: prg})
	}
	return out, errs
}

// FormatScore says a score as explain-placement and a Placement's status.scores show it: four
// significant figures.
func FormatScore(s float64) string { return strconv.FormatFloat(s, 'g', 4, 64) }
