"""``python -m rightsize`` is the same as the ``rightsize`` console script."""

from rightsize.cli import main

if __name__ == "__main__":
    main()
