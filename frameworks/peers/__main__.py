"""python -m frameworks.peers: see frameworks/peers/__init__.py."""
from frameworks.peers.cli import main

if __name__ == "__main__":
    main()
