"""The degrade state, the contract between the controller and every router: its wire, its
application to one request, and which models a lane serves."""
