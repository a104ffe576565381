package api

// KeyLookups is how many times the server read an API key from the
// database.
func KeyLookups(s *Server) int64 { return s.keys.lookups.Load() }
