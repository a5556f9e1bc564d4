package delivery

// ChartRenders is how many times the process's chart renderer ran Helm's engine, for the tests.
func ChartRenders() int64 { return charts.Renders() }
