"""hsitp.data"""
