"""Moved to kvplan.model (issue 11); this package of aliases goes when every importer is updated."""
