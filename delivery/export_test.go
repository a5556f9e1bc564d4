package delivery

// ChartRenders is how many times the process's chart renderer ran Helm's engine, for the tests.
func ChartRenders() int64 { return charts.Renders() }

// Deafen makes c drop (or, deaf false, hear again) its members' watch events, as a watch that
// missed them would.
func Deafen(c *Controller, deaf bool) {
	switch _, was := deafened.Load(c); {
	case deaf && !was:
		deafened.Store(c, struct{}{})
		deafCount.Add(1)
	case !deaf && was:
		deafened.Delete(c)
		deafCount.Add(-1)
	}
}
