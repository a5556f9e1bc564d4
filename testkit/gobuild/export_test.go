package gobuild

// OwnDir is ownDir, for the tests.
var OwnDir = ownDir
