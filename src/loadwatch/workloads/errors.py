"""A dataset that cannot be used: the message names the file and line."""


class DatasetError(Exception):
    pass
