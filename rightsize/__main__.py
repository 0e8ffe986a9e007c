"""``python -m rightsize`` is the same as the ``rightsize`` console script."""

from rightsize.cli import entry

if __name__ == "__main__":
    entry()
