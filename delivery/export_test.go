package delivery

// ChartRenders is how many times the process's chart renderer ran Helm's engine, for the tests.
func ChartRenders() int64 { return charts.Renders() }

// HelmApplies is how many Helm-mode applies c made or found unchanged.
func HelmApplies(c *Controller) int64 { return c.helmApplies.Load() }
