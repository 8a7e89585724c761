"""hsitp.cost"""
