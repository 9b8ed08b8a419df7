"""Real stand-ins the tests run on loopback: a wheel builder, a package index, a code host."""
