package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const report = `- ./multicluster.FleetOf: removed
- ./multicluster.(*Fleet).Start: changed from func(context.Context) error to func() error
- ./health.Options.Interval: changed from time.Duration to int
`

func names(cs []change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.name)
	}
	return out
}

func TestAnIncompatibleChangeNeedsABreakingEntry(t *testing.T) {
	changes, err := incompatible(strings.NewReader(report))
	require.NoError(t, err)
	require.Equal(t, []string{"multicluster.FleetOf", "multicluster.Fleet.Start", "health.Options.Interval"}, names(changes))

	changelog := "# Changelog\n\n## Unreleased\n\n### Breaking\n- `multicluster.Fleet.Start` takes no context: call it once.\n" +
		"- `health.Options.Interval` is in seconds.\n\n### Added\n- multicluster.FleetOf2\n\n## v0.1.0\n\n### Breaking\n- multicluster.FleetOf\n"
	// FleetOf is named only in an older release's section and as part of a longer name.
	require.Equal(t, []string{"multicluster.FleetOf"}, names(unannounced(changes, breakingSection(changelog))))
	require.Empty(t, unannounced(changes, breakingSection(strings.Replace(changelog, "is in seconds.", "is in seconds.\n- multicluster.FleetOf is gone.", 1))))
	require.Len(t, unannounced(changes, breakingSection("## Unreleased\n\n### Added\n- multicluster.FleetOf\n")), 3, "no Breaking section announces nothing")
	require.Len(t, unannounced(changes, breakingSection("## Unreleased\n### Breaking\n- `multicluster.Fleet`\n")), 3, "a shorter name does not announce a member of it")
}

func TestMalformedApidiffOutputIsAnError(t *testing.T) {
	_, err := incompatible(strings.NewReader("- ./multicluster.FleetOf removed\n"))
	require.ErrorContains(t, err, "without a colon")
}
