// (tests to be written)
