"""Placeholder until the table contract lands from main."""


def comment_statements(table, columns):
    return []
