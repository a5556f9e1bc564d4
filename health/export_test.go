package health

// HostileAPIServer is hostileAPIServer, for the package's integration tests.
var HostileAPIServer = hostileAPIServer
