package delivery

// ChartRenders is how many times the process's chart renderer ran Helm's engine, for the tests.
func ChartRenders() int64 { return charts.Renders() }

// HelmApplies is how many Helm-mode applies c made or found unchanged.
func HelmApplies(c *Controller) int64 { return c.helmApplies.Load() }

// Deafen makes c drop (or, deaf false, hear again) its members' watch events, as a watch that
// missed them would.
func Deafen(c *Controller, deaf bool) { c.deaf.Store(deaf) }
